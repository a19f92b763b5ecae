"""When the timing of one size has seen enough repetitions (sequential stopping).

A rung's `reps` is a ceiling; its `precision` is the goal. After at least MIN_REPS paired
repetitions, a size's timing stops as soon as the 95% interval of the median of its paired
ratios (reference / candidate, one a repetition) lies within `precision` of that median on both
sides. The interval is the order-statistic one (the ranks n/2 -+ 1.96 sqrt(n)/2): free of any
assumption about the noise's shape and a sort away, where the bootstrap that a result reports
(engine.timing.stats) would cost more than a repetition of a small call. The repetitions go where
the noise is: a call that varies 1% settles at 1% within a few rotations; a call of a fraction
of a millisecond varies with the host's scheduling and takes them all, which costs little.

Stopping when an interval first looks narrow makes it a little optimistic (optional stopping);
MIN_REPS and a goal no finer than the machine's noise keep that small beside the margins the
scheduler already leaves between candidates (engine.search.scheduler).
"""

from __future__ import annotations

import math

MIN_REPS = 8
Z95 = 1.96


def median_interval(cand_ms: list[float], ref_ms: list[float]) -> tuple[float, float, float]:
    """(median, low, high) of the paired ratios reference / candidate, the 95% order-statistic
    interval of the median."""
    ratios = sorted(r / c for r, c in zip(ref_ms, cand_ms, strict=True))
    n = len(ratios)
    middle = (ratios[(n - 1) // 2] + ratios[n // 2]) / 2
    half = Z95 * math.sqrt(n) / 2
    low, high = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return middle, ratios[low], ratios[high]


def settled(cand_ms: list[float], ref_ms: list[float], precision: float) -> bool:
    """Whether paired samples so far pin the speedup down to `precision` (0: never)."""
    if precision <= 0 or len(cand_ms) < MIN_REPS or min(cand_ms) <= 0:
        return False
    middle, low, high = median_interval(cand_ms, ref_ms)
    return middle - low <= precision * middle and high - middle <= precision * middle


def stopped_at(cand_ms: list[float], ref_ms: list[float], precision: float, sets: int) -> int:
    """How many of these samples a timing that checks `settled` at the end of each rotation of
    `sets` input sets takes (the simulated backend draws them all first)."""
    for n in range(sets, len(cand_ms), sets):
        if settled(cand_ms[:n], ref_ms[:n], precision):
            return n
    return len(cand_ms)
