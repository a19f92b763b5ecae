"""Timing statistics and the cpu timing loop."""

import random
import statistics

import pytest
import torch

from engine.timing.bench import CpuTimer, time_round_robin
from engine.timing.stats import speedup_interval, summarize


def samples(seed: int, n: int = 50, center: float = 2.0, spread: float = 0.1) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.gauss(0, spread)) for _ in range(n)]


def test_summary_is_reproducible_and_covers_the_median():
    x = samples(1)
    a, b = summarize(x), summarize(x)
    assert a == b
    assert a.median == pytest.approx(statistics.median(x))
    assert a.ci_low < a.median < a.ci_high
    assert a.cv == pytest.approx(statistics.stdev(x) / statistics.mean(x))
    q = statistics.quantiles(x, n=4, method="inclusive")
    assert a.iqr == pytest.approx(q[2] - q[0])


def test_interval_narrows_with_more_samples():
    wide, narrow = summarize(samples(2, n=10)), summarize(samples(2, n=400))
    assert narrow.ci_high - narrow.ci_low < wide.ci_high - wide.ci_low


def test_interval_covers_the_true_median_most_of_the_time():
    covered = 0
    for seed in range(100):
        s = summarize(samples(seed, n=40, center=2.0), resamples=500)
        covered += s.ci_low <= 2.0 <= s.ci_high
    assert covered >= 85


def test_speedup_and_its_interval():
    ref, cand = samples(3, center=2.0), samples(4, center=1.0)
    speedup, (low, high) = speedup_interval(ref, cand)
    assert speedup == pytest.approx(statistics.median(ref) / statistics.median(cand))
    assert low < speedup < high
    assert 1.8 < low and high < 2.2
    assert speedup_interval(ref, cand) == (speedup, (low, high))


def test_single_sample_has_zero_spread():
    s = summarize([1.5])
    assert (s.median, s.ci_low, s.ci_high, s.cv, s.iqr) == (1.5, 1.5, 1.5, 0.0, 0.0)


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="no timing samples"):
        summarize([])


def test_cpu_timing_interleaves_and_rotates_input_sets():
    calls = []
    candidate = lambda x: calls.append(("cand", int(x[0])))
    reference = lambda x: calls.append(("ref", int(x[0])))
    inputs = [[torch.tensor([k])] for k in range(3)]
    samples = time_round_robin({"cand": candidate, "ref": reference}, inputs, 4, CpuTimer())
    cand, ref = samples["cand"], samples["ref"]
    assert len(cand) == len(ref) == 4 and all(t >= 0 for t in cand + ref)
    timed = calls
    assert timed == [("cand", 0), ("ref", 0), ("ref", 1), ("cand", 1),
                     ("cand", 2), ("ref", 2), ("ref", 0), ("cand", 0)]  # fmt: skip
