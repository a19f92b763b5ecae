"""The sim backend: deterministic synthetic timings, the real static gate, and speed."""

from pathlib import Path

import pytest

from engine.backends import make_backend, resolve_backend
from engine.backends.sim import SimBackend
from engine.jobs import EvalJob, RungSpec
from engine.problems import load_problem

VALID = (Path(__file__).parent / "candidates" / "softmax_valid.py").read_text()


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


def rung(index=1, labels=("full0", "full1"), profile=False):
    return RungSpec(index, labels, warmup=3, reps=20, profile=profile)


def variant(i: int) -> str:
    return VALID + f"\n# variant {i}\n"


def test_same_seed_same_result_across_backends(softmax):
    job = EvalJob("a", VALID, rung(), seed=7)
    first, second = SimBackend().evaluate(softmax, job), SimBackend().evaluate(softmax, job)
    assert first.to_dict() == second.to_dict()
    assert first.passed and len(first.timings) == 2
    other = SimBackend().evaluate(softmax, EvalJob("a", VALID, rung(), seed=8))
    assert other.timings[0].samples_ms != first.timings[0].samples_ms


def test_candidates_differ_and_some_fail(softmax):
    sim = SimBackend()
    results = [sim.evaluate(softmax, EvalJob(str(i), variant(i), rung(), 1)) for i in range(200)]
    speedups = {round(r.timings[0].speedup, 6) for r in results if r.passed}
    failed = [r for r in results if not r.passed]
    assert len(speedups) > 150
    assert 2 <= len(failed) <= 40
    assert all(r.reason and "simulated" in r.message for r in failed)


def test_static_gate_is_real(softmax):
    bad = VALID.replace("return y", "return torch.softmax(y, 1)")
    result = SimBackend().evaluate(softmax, EvalJob("b", bad, rung(), 1))
    assert result.reason == "calls_replaced_operator"


def test_gpu_seconds_by_activity(softmax):
    result = SimBackend().evaluate(softmax, EvalJob("c", VALID, rung(profile=True), 1))
    assert set(result.gpu_seconds) == {"compile", "check", "time", "profile"}
    assert all(v > 0 for v in result.gpu_seconds.values())
    assert result.profile["status"] == "unavailable"


def test_make_backend():
    assert resolve_backend("auto") in ("cuda", "cpu")
    assert make_backend("sim").name == "sim"
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend("tpu")
