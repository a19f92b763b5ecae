"""Sequential stopping of a size's timing (engine.timing.sequential): a rung's repetitions are a
ceiling, and a size whose speedup is pinned down to the rung's precision stops early, in the real
judge too."""

import random

from engine.search.rungs import default_ladder
from engine.timing.sequential import MIN_REPS, settled, stopped_at
from tests.adversarial import softmax as attacks
from tests.test_judge_adversarial import TIMING, judge


def samples(ms: float, cv: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [ms * (1 + rng.gauss(0.0, cv)) for _ in range(n)]


def test_steady_calls_settle_and_noisy_ones_take_every_repetition():
    steady_ref, steady = samples(12.0, 0.01, 100, 1), samples(3.0, 0.01, 100, 2)
    noisy_ref, noisy = samples(0.5, 0.1, 100, 3), samples(0.2, 0.1, 100, 4)
    taken = stopped_at(steady, steady_ref, 0.01, 4)
    assert MIN_REPS <= taken < 40 and taken % 4 == 0
    assert stopped_at(noisy, noisy_ref, 0.01, 4) == 100


def test_a_coarser_goal_stops_sooner_and_none_never_stops():
    ref, cand = samples(12.0, 0.02, 100, 5), samples(3.0, 0.02, 100, 6)
    assert stopped_at(cand, ref, 0.05, 2) < stopped_at(cand, ref, 0.01, 2)
    assert stopped_at(cand, ref, 0.0, 2) == 100


def test_never_before_the_minimum_however_steady():
    assert not settled([1.0] * (MIN_REPS - 1), [2.0] * (MIN_REPS - 1), 0.5)
    assert settled([1.0] * MIN_REPS, [2.0] * MIN_REPS, 0.5)


def test_the_gpu_ladder_stops_its_top_rungs_early_and_the_cpu_ladder_does_not(softmax):
    gpu, cpu = default_ladder(softmax, "cuda"), default_ladder(softmax, "cpu")
    assert [r.precision for r in gpu[1:]] == [0.02, 0.01]
    assert all(r.reps < MIN_REPS or r.precision == 0 for r in cpu)


def test_the_judge_stops_a_settled_size_at_the_end_of_a_rotation(backend, softmax):
    """With a goal every timing meets (the cpu's timings of a loaded machine vary by more than
    twice), the judge stops at the first end of a rotation where two calls were verified, past
    the minimum; without one it takes every repetition."""
    anything = {**TIMING, "reps": 24, "precision": 1e9}
    stopped = judge(backend, softmax, attacks.VALID, anything)
    assert stopped.passed, stopped.message
    taken = len(stopped.timings[0].samples_ms)
    assert MIN_REPS <= taken < 24 and taken % TIMING["input_sets"] == 0
    full = judge(backend, softmax, attacks.VALID, {**TIMING, "reps": 24})
    assert len(full.timings[0].samples_ms) == 24
