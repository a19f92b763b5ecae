"""A small text plot of the best speedup against GPU-seconds (device-seconds) spent."""

from __future__ import annotations

from collections.abc import Sequence

from kbtui.formatting import BLOCKS, duration

AXIS_WIDTH = 7  # "12.34× " on the left of each row


def best_speedup_plot(
    progress: Sequence[Sequence[float]], width: int, height: int, device: str = "GPU"
) -> str:
    """Bars of the best speedup reached by each GPU-second, `height` rows of `width` cells.

    `progress` is the snapshot's list of [gpu_seconds, best_speedup] points, in order; `device`
    names the seconds on the axis (engine.session_files.device_word)."""
    if not progress:
        return "no evaluations yet"
    columns = max(1, width - AXIS_WIDTH)
    x_max = max(point[0] for point in progress) or 1.0
    y_max = max(point[1] for point in progress) or 1.0
    levels = []
    for column in range(columns):
        x = x_max * (column + 1) / columns
        reached = [y for gx, y in progress if gx <= x]
        levels.append(round((reached[-1] if reached else 0.0) / y_max * height * 8))
    rows = []
    for row in range(height):
        floor = (height - 1 - row) * 8
        cells = "".join(BLOCKS[max(0, min(8, level - floor))] for level in levels)
        label = f"{y_max:.2f}×" if row == 0 else ("0" if row == height - 1 else "")
        rows.append(f"{label:>{AXIS_WIDTH - 1}} {cells}")
    left, right = "0", f"{duration(x_max)} {device}"
    rows.append(" " * AXIS_WIDTH + left + right.rjust(columns - len(left)))
    return "\n".join(rows)
