"""Plain-text formatting of the numbers the panes show."""

from __future__ import annotations

import time
from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"
MISSING = "—"


def number(value: float | None, digits: int = 3) -> str:
    """A value with `digits` significant digits, or a dash when unknown."""
    if value is None:
        return MISSING
    return f"{value:.{digits}g}"


def milliseconds(value: float | None) -> str:
    return MISSING if value is None else f"{value:.4g} ms"


def percent(fraction: float | None) -> str:
    return MISSING if fraction is None else f"{100 * fraction:.1f}%"


def speedup(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}×"


def speedup_with_interval(value: float | None, interval: Sequence[float] | None) -> str:
    """ "2.31× [2.20, 2.40]": the point estimate and its confidence interval."""
    if value is None:
        return MISSING
    if not interval:
        return speedup(value)
    low, high = interval
    return f"{value:.2f}× [{low:.2f}, {high:.2f}]"


def compact_interval(value: float | None, interval: Sequence[float] | None) -> str:
    """ "2.31 [2.20,2.40]": a speedup and its interval in as few cells as possible."""
    if value is None:
        return MISSING
    if not interval:
        return f"{value:.2f}"
    return f"{value:.2f} [{interval[0]:.2f},{interval[1]:.2f}]"


def interval(low: float | None, high: float | None) -> str:
    """ "0.688–0.731": a confidence interval, three significant digits a side."""
    if low is None or high is None:
        return MISSING
    return f"{low:.3g}–{high:.3g}"


def duration(seconds: float | None) -> str:
    """Seconds as 1h02m, 28m20s or 4.5s."""
    if seconds is None:
        return MISSING
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def dollars(value: float | None) -> str:
    return MISSING if value is None else f"${value:.2f}"


def clock(timestamp: float) -> str:
    """Local time of day, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def sparkline(values: Sequence[float], low: float, high: float) -> str:
    """One block character per value, scaled between `low` and `high`."""
    span = high - low
    if span <= 0:
        return BLOCKS[4] * len(values)
    top = len(BLOCKS) - 1
    return "".join(
        BLOCKS[max(1, min(top, round(1 + (value - low) / span * (top - 1))))] for value in values
    )


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
