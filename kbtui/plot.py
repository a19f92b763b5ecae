"""A small text plot of the best speedup against GPU-seconds (device-seconds) spent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

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


PLOT_BARS = (2, 8)  # rows of bars: the fewest worth drawing, the most worth the room
CHART_GAP = 3  # columns between the ledger's lines and a chart drawn beside them
CHART_MIN_WIDTH = 16  # the axis and nine columns of bars


class ChartPlace(NamedTuple):
    """Where the Budget pane draws its chart (title, bars, axis): at `column`, `row` of the pane,
    `width` cells wide with `bars` rows of bars."""

    column: int
    row: int
    width: int
    bars: int


def chart_place(ledger_widths: Sequence[int], width: int, height: int) -> ChartPlace:
    """The chart's place in a pane `width` x `height` whose ledger has lines this wide: below the
    ledger where the pane has rows to spare; else beside the ledger's first lines, where those are
    narrow enough to leave it CHART_MIN_WIDTH; else below at its smallest (the pane scrolls)."""
    lines = len(ledger_widths)
    spare = height - lines - 2  # the title's row and the axis's
    if spare >= PLOT_BARS[0]:
        return ChartPlace(0, lines, width, min(spare, PLOT_BARS[1]))
    for rows in range(min(lines, height), PLOT_BARS[0] + 1, -1):
        column = max(ledger_widths[:rows]) + CHART_GAP
        if width - column >= CHART_MIN_WIDTH:
            return ChartPlace(column, 0, width - column, min(rows - 2, PLOT_BARS[1]))
    return ChartPlace(0, lines, width, PLOT_BARS[0])


def chart_title(device: str, width: int) -> str:
    """The chart's title, shortened where the chart is narrow (its axis names the seconds)."""
    title = f"best speedup vs {device}-seconds"
    return title if len(title) <= width else "best speedup"
