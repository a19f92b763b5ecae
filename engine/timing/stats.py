"""Robust summaries of timing samples: median, bootstrap 95% interval, CV, IQR, speedup.

Bootstrap resampling uses a seeded generator, so the same samples always give the same interval.
"""

from __future__ import annotations

import numpy as np

from engine.jobs import Stats

BOOTSTRAP_SEED = 20240611
RESAMPLES = 2000


def _row_medians(m: np.ndarray) -> np.ndarray:
    """Median of each row (faster than np.median for the short rows of a bootstrap)."""
    s = np.sort(m, axis=1)
    n = m.shape[1]
    return (s[:, (n - 1) // 2] + s[:, n // 2]) / 2.0


def _interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def summarize(samples_ms, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Stats:
    """Median, bootstrap 95% interval of the median, coefficient of variation and IQR."""
    x = np.asarray(samples_ms, dtype=float)
    if x.size == 0:
        raise ValueError("no timing samples to summarize")
    rng = np.random.default_rng(seed)
    medians = _row_medians(x[rng.integers(0, x.size, (resamples, x.size))])
    low, high = _interval(medians)
    mean = float(x.mean())
    cv = float(x.std(ddof=1) / mean) if x.size > 1 and mean > 0 else 0.0
    q1, q3 = np.percentile(x, [25, 75])
    return Stats(float(np.median(x)), low, high, cv, float(q3 - q1))


def speedup_interval(
    ref_ms, cand_ms, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, tuple[float, float]]:
    """Reference median / candidate median and its bootstrap 95% interval. Samples taken in
    the same repetition (interleaved timing) are resampled as pairs."""
    ref, cand = np.asarray(ref_ms, dtype=float), np.asarray(cand_ms, dtype=float)
    rng = np.random.default_rng(seed)
    ref_idx = rng.integers(0, ref.size, (resamples, ref.size))
    cand_idx = (
        ref_idx if ref.size == cand.size else rng.integers(0, cand.size, (resamples, cand.size))
    )
    ratios = _row_medians(ref[ref_idx]) / _row_medians(cand[cand_idx])
    return float(np.median(ref) / np.median(cand)), _interval(ratios)
