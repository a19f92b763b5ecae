"""The score S(p, r) that ranks candidates measured at a rung.

S = G * (1 + RUNG_BONUS * r) * exp(-INSTABILITY_WEIGHT * max(0, CV - CV_TOLERATED))

G is the geometric mean over the rung's shapes of the speedup (reference median over candidate
median, both timed in the same call); CV is the worst coefficient of variation among the
candidate's shapes. The bonus makes a candidate confirmed at a higher rung win a near-tie against
one only screened lower; the penalty makes a noisy kernel rank below a steady one of equal
median.
"""

from __future__ import annotations

import math

from engine.jobs import EvalResult
from engine.records import shape_result

RUNG_BONUS = 0.02  # 2% per rung: smaller than typical noise, so it only breaks near-ties
CV_TOLERATED = 0.03  # timing noise up to 3% is normal on a busy GPU and costs nothing
INSTABILITY_WEIGHT = 2.0  # a CV of 13% costs about 18% of the score


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def speedup_summary(result: EvalResult) -> tuple[float, float, float, float]:
    """(geomean speedup, geomean of interval lows, geomean of interval highs, worst CV)."""
    timings = result.timings
    speedup = geometric_mean([t.speedup for t in timings])
    low = geometric_mean([max(t.speedup_ci[0], 1e-9) for t in timings])
    high = geometric_mean([t.speedup_ci[1] for t in timings])
    cv = max(t.stats.cv for t in timings)
    return speedup, low, high, cv


def per_shape(result: EvalResult) -> dict[str, list[float]]:
    """{size label: [speedup, interval low, interval high]} of an evaluation's timings."""
    return {t.size_label: shape_result(t.speedup, *t.speedup_ci) for t in result.timings}


def score(speedup: float, cv: float, rung: int) -> float:
    """S(p, r) from a rung's geometric-mean speedup and worst CV (speedup_summary)."""
    penalty = math.exp(-INSTABILITY_WEIGHT * max(0.0, cv - CV_TOLERATED))
    return speedup * (1 + RUNG_BONUS * rung) * penalty
