"""A bench over a set of KernelBench files: the files a folder holds (KernelBench's own layout,
`level1/`, `level2/` ..., filtered by level), and KernelBench's metrics over the set.

A file of the set that cannot be loaded, or that no generator can start a search on, is reported
with why and counts as a problem without a correct kernel; it never stops the bench.

Metrics (KernelBench's, over every file of one command's set, skipped ones included):
- correct: the share of problems whose search found a gate-passing kernel that passed the judge
  again when the bench timed it at every size (an answer the final timing rejects, say as
  stale_output, is no correct kernel);
- fast_p against eager and against torch.compile: the share of problems with a correct kernel
  whose speedup (the geometric mean over the problem's timed sizes) is above p, for p = 1, 1.5, 2;
- geomean speedup over eager and over torch.compile, of the problems with a correct kernel;
- GPU-seconds per problem, of the searches.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

FAST_P = (1.0, 1.5, 2.0)
LEVEL_FOLDER = re.compile(r"level(\d+)$")


def expand_folder(folder: Path, levels: tuple[int, ...]) -> list[str]:
    """The problem files of a KernelBench folder: its own .py files and those of its levelN
    folders (only the given levels, when any are given), in name order."""
    files = []
    if not levels:
        files += sorted(folder.glob("*.py"))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        match = LEVEL_FOLDER.match(sub.name)
        if match and (not levels or int(match.group(1)) in levels):
            files += sorted(sub.glob("*.py"))
    return [str(f) for f in files if not f.name.startswith("_")]


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def answer_held(rows: list[dict], problem: str) -> bool:
    """Whether the problem's answer passed the judge's timing at each of its sizes."""
    mine = [r for r in rows if r["problem"] == problem]
    return bool(mine) and all(r["best_candidate"] and r.get("best_ms") for r in mine)


def problem_speedups(rows: list[dict], problem: str) -> dict[str, float | None]:
    """The problem's speedups over eager and torch.compile: geometric means over its sizes."""
    mine = [r for r in rows if r["problem"] == problem and r["best_candidate"]]
    found = {}
    for baseline in ("eager", "compile"):
        values = [r[f"speedup_{baseline}"] for r in mine if r[f"speedup_{baseline}"]]
        found[baseline] = _geomean(values) if values and len(values) == len(mine) else None
    return found


def kernelbench_metrics(names: list[str], skipped: dict[str, str], rows: list[dict],
                        searches: dict[str, dict]) -> dict:  # fmt: skip
    """KernelBench's metrics over the set: `names` the benched problems, `searches` their
    ladder searches' summaries by name, `skipped` the files that never got a search (file: why)."""
    total = len(names) + len(skipped)
    per_problem = {}
    for name in names:
        search = searches.get(name, {})
        per_problem[name] = {
            "correct": bool(search.get("best_candidate")) and answer_held(rows, name),
            **{f"speedup_{k}": v for k, v in problem_speedups(rows, name).items()},
            "gpu_seconds": search.get("gpu_seconds_total"),
        }
    metrics: dict = {"problems": total, "skipped": skipped, "per_problem": per_problem}
    correct = [p for p in per_problem.values() if p["correct"]]
    metrics["correct"] = len(correct) / total if total else None
    for baseline in ("eager", "compile"):
        speedups = [p[f"speedup_{baseline}"] for p in correct if p[f"speedup_{baseline}"]]
        for p in FAST_P:
            share = sum(s > p for s in speedups) / total if total else None
            metrics[f"fast_{p:g}_{baseline}"] = share
        metrics[f"geomean_speedup_{baseline}"] = _geomean(speedups)
    seconds = [p["gpu_seconds"] for p in per_problem.values() if p["gpu_seconds"] is not None]
    metrics["gpu_seconds_per_problem"] = sum(seconds) / len(seconds) if seconds else None
    return metrics


def metrics_lines(metrics: dict) -> list[str]:
    """The metrics as markdown lines."""

    def share(key: str) -> str:
        value = metrics[key]
        return "-" if value is None else f"{100 * value:.0f}%"

    def ratio(key: str) -> str:
        value = metrics[key]
        return "-" if value is None else f"{value:.2f}x"

    unfinished = metrics.get("unfinished", [])
    pending = f" ({len(unfinished)} more not timed yet: {', '.join(unfinished)})"
    lines = [
        f"{metrics['problems']} problems{pending if unfinished else ''}; "
        f"correct {share('correct')}; GPU-s per problem "
        + (
            "-"
            if metrics["gpu_seconds_per_problem"] is None
            else f"{metrics['gpu_seconds_per_problem']:.1f}"
        ),  # fmt: skip
        "",
        "| against | fast_1 | fast_1.5 | fast_2 | geomean speedup |",
        "|---|---|---|---|---|",
    ]
    for baseline, name in (("eager", "eager"), ("compile", "torch.compile")):
        fast = [share(f"fast_{p:g}_{baseline}") for p in FAST_P]
        lines.append(f"| {name} | {' | '.join(fast)} | {ratio(f'geomean_speedup_{baseline}')} |")
    if metrics["skipped"]:
        lines += ["", "Files without a search (counted as not correct):", ""]
        for file, why in metrics["skipped"].items():  # a loader's message names the file
            lines.append(f"- {why}" if why.startswith(file) else f"- {file}: {why}")
    return lines
