"""The KernelBench sample's files (docs/kernelbench_sample.md) in an interleaved order, for
`kernelbrain bench $(python -m engine.benchmarks.kernelbench_order)`: each file is placed by its
rank within its category over the category's size, so a bench cut short has timed every
category early rather than the first categories whole."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_TABLE = ROOT / "docs" / "kernelbench_sample.md"
SAMPLE_FOLDER = Path("tests") / "problems_kernelbench" / "sample"
ROW = re.compile(r"\| (\d) \| (\w+) \| `([^`]+)` \|")


def interleaved(table: str) -> list[str]:
    by_category: dict[tuple[str, str], list[str]] = {}
    for level, category, file in ROW.findall(table):
        path = SAMPLE_FOLDER / f"level{level}" / file
        by_category.setdefault((level, category), []).append(str(path))
    placed = [((i + 0.5) / len(files), key, file)
              for key, files in by_category.items() for i, file in enumerate(files)]  # fmt: skip
    return [file for *_, file in sorted(placed)]


if __name__ == "__main__":
    print(" ".join(interleaved(SAMPLE_TABLE.read_text())))
