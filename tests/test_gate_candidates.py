"""The whole gate on real candidate files, in real worker subprocesses on the cpu backend."""

import os
import random
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from engine.backends.faults import Backoff
from engine.backends.local import LocalBackend
from engine.cli.check import gate
from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.jobs import EvalJob, RungSpec
from engine.problems import builtin_names, load_problem
from engine.worker import Timeouts

CANDIDATES = Path(__file__).parent / "candidates"


def source(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def backend():
    local = LocalBackend("cpu", timeouts=Timeouts(compile_s=20, run_s=20, time_s=30))
    yield local
    local.close()


@pytest.mark.parametrize("name", ["softmax_valid", "softmax_prints"])
def test_valid_softmax_passes(backend, softmax, name):
    result = backend.check(softmax, source(name))
    assert result.passed, result.message
    assert result.reason is None
    assert 0 <= result.error <= result.tolerance
    assert result.precision == "fp32"


@pytest.mark.parametrize("problem", builtin_names())
def test_valid_candidate_for_each_builtin_passes(backend, problem):
    result = backend.check(load_problem(problem), source(f"{problem}_valid"))
    assert result.passed, result.message
    assert result.precision == "fp32"  # IEEE tl.dot where the kernel uses one


@pytest.mark.parametrize(
    "name, reason, words",
    [
        ("softmax_zeros", "constant_output", "all zeros"),
        ("softmax_constant", "constant_output", "constant 0.5"),
        ("softmax_nan", "nan_output", "NaN"),
        ("softmax_truncated_mantissa", "wrong_output", "exceeds the tolerance"),
        ("softmax_partial", "unwritten_output", "600 of 1200"),
        ("softmax_mutates", "mutates_input", "input 0"),
        ("softmax_calls_torch", "calls_replaced_operator", "torch.softmax"),
        ("softmax_runtime_getattr", "calls_replaced_operator", "at run time"),
        ("softmax_signature", "signature_mismatch", "Model.forward(x)"),
        ("softmax_compile_error", "compile_error", "arange's range must be a power of 2"),
        ("softmax_oom", "out_of_memory", "line 27"),
        ("softmax_grid_axis1", "launch_error", "at most 65535 there"),
    ],
)
def test_rejected(backend, softmax, name, reason, words):
    result = backend.check(softmax, source(name))
    assert not result.passed
    assert result.reason == reason, result.message
    assert words in result.message


def test_tensor_division_is_caught_at_run_time(backend):
    result = backend.check(load_problem("rmsnorm"), source("rmsnorm_dunder"))
    assert result.reason == "calls_replaced_operator"
    assert "`div`" in result.message


def test_cached_output_fails_at_the_check(backend, softmax):
    """The check calls one ModelNew instance on several seeds: an output cached from the first
    call is caught before any timing."""
    result = backend.check(softmax, source("softmax_cached"))
    assert result.reason == "stale_output", result.message
    assert "earlier, different input" in result.message


@pytest.mark.parametrize("name", ["relu_below_zero", "shift_below_fp32"])
def test_an_output_that_repeats_with_its_reference_is_not_stale(backend, name):
    """Only an output repeated while both references changed (float64 and PyTorch's own) is
    stale: a ReLU of values below zero is all zeros for every input, one plus a shift below
    fp32's resolution all ones in fp32, and a kernel computing either passes."""
    problem = load_problem(str(Path(__file__).parent / "problems_unseen" / f"{name}.py"))
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    kernel = OfflineGenerator(problem).propose(request).proposals[0]
    result = backend.check(problem, kernel.source)
    assert result.passed, result.message


def test_evaluate_times_against_reference(backend, softmax):
    job = EvalJob("v1", source("softmax_valid"), RungSpec(0, ("full0",), 1, 4, input_sets=2), 5)
    result = backend.evaluate(softmax, job)
    assert result.passed, result.message
    assert not result.meaningful
    (timing,) = result.timings
    assert timing.size_label == "tiny"  # the cpu backend stands tiny sizes in for full ones
    assert len(timing.samples_ms) == len(timing.ref_samples_ms) == 4
    assert timing.speedup_ci[0] <= timing.speedup <= timing.speedup_ci[1]
    # the judge's own work is its own activity, apart from the candidate's calls
    assert set(result.gpu_seconds) == {"compile", "reference", "check", "time"}
    assert result.profile is None


def test_profile_on_cpu_is_unavailable(backend, softmax):
    rung = RungSpec(1, ("tiny",), 0, 2, input_sets=1, profile=True, check_seeds=1)
    result = backend.evaluate(softmax, EvalJob("v2", source("softmax_valid"), rung, 1, check=False))
    assert result.passed
    assert result.profile == {"status": "unavailable", "why": "cpu backend has no GPU"}


def test_endless_loop_times_out_and_only_its_runner_dies(softmax):
    local = LocalBackend("cpu", timeouts=Timeouts(compile_s=3, run_s=3))
    try:
        started = time.monotonic()
        result = local.check(softmax, source("softmax_endless"))
        assert result.reason == "timeout"
        assert "3 s deadline" in result.message
        assert time.monotonic() - started < 30
        judge = local.judge_client.pid
        assert judge is not None  # the judge killed the runner and goes on
        assert local.check(softmax, source("softmax_valid")).passed
        assert (local.judge_client.pid, local.judge_client.starts) == (judge, 1)
    finally:
        local.close()


def test_segfault_is_a_crash_and_worker_recovers(backend, softmax):
    result = backend.check(softmax, source("softmax_segfault"))
    assert result.reason == "crash"
    assert "segmentation fault" in result.message
    assert backend.check(softmax, source("softmax_valid")).passed


def test_worker_killed_from_outside_mid_run(softmax):
    local = LocalBackend("cpu", timeouts=Timeouts(compile_s=60, run_s=60))
    try:
        assert local.check(softmax, source("softmax_valid")).passed
        pid = local.judge_client.pid
        outcome = {}
        runner = threading.Thread(
            target=lambda: outcome.update(r=local.check(softmax, source("softmax_endless")))
        )
        runner.start()
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        runner.join(30)
        assert outcome["r"].reason == "crash"
        assert "SIGKILL" in outcome["r"].message
        assert local.check(softmax, source("softmax_valid")).passed
        assert local.judge_client.pid != pid
    finally:
        local.close()


def test_check_gate_api(softmax, backend):
    result = gate(softmax, source("softmax_zeros"), backend, seed=3)
    assert (result.passed, result.reason) == (False, "constant_output")


def test_timing_without_a_check_holds_the_output_to_the_gates_tolerance(backend, tmp_path):
    """A later rung times without checking full outputs first: its spot checks of timed outputs
    allow what the gate allowed (this problem's 1e-2; bfloat16's mantissa errs ~2e-3)."""
    loose = tmp_path / "softmax_loose.py"
    builtin = Path(load_problem("softmax").path).read_text()
    loose.write_text(builtin.replace("TOLERANCE = 1e-5", "TOLERANCE = 1e-2"))
    problem = load_problem(str(loose))
    candidate = source("softmax_truncated_mantissa")
    assert backend.check(problem, candidate).passed
    rung = RungSpec(1, ("full0",), 1, 6, input_sets=2)
    result = backend.evaluate(problem, EvalJob("t1", candidate, rung, seed=3, check=False))
    assert result.passed, result.message
    softmax = load_problem("softmax")
    tight = backend.evaluate(softmax, EvalJob("t2", candidate, rung, seed=3, check=False))
    assert tight.reason == "stale_output"  # beyond softmax's own 1e-5, timed outputs fail


def test_a_judge_short_of_memory_for_its_own_buffers_asks_again_and_blames_no_candidate(tmp_path):
    unseen = Path(__file__).parent / "problems_unseen" / "relu_below_zero.py"
    relu = load_problem(str(unseen))
    request = GenerationRequest(relu, "coarse", 0, random.Random(0))
    kernel = OfflineGenerator(relu).propose(request).proposals[0]
    hungry = tmp_path / "relu_hungry.py"  # its inputs fit no host: the judge's allocation fails
    hungry.write_text(
        unseen.read_text().replace("return [torch.rand(n)]", "return [torch.empty(1 << 46)]")
    )
    backend = LocalBackend("cpu", backoff=Backoff(first_s=0.1))
    try:
        job = EvalJob("m1", kernel.source, RungSpec(0, ("full",), 1, 2, input_sets=1), seed=1)
        result = backend.evaluate(load_problem(str(hungry)), job)
        assert result.reason == "machine_fault", result.message
        assert "the judge could not allocate its own buffers" in result.message
        assert "can't allocate memory" in result.message and "(3 tries)" in result.message
        assert backend.judge_client.starts == 1  # the judge lived through it, and serves on
        assert backend.evaluate(relu, replace(job, candidate_id="m2")).passed
    finally:
        backend.close()


def test_an_operator_bound_in_setup_and_called_in_forward_is_refused(backend, softmax):
    """Attack on the static check's leave for setup code: bind torch.softmax in __init__ and
    call it in forward. The run-time record of forward's operators refuses it."""
    attack = source("softmax_valid").replace(
        "super().__init__()", "super().__init__()\n        self.op = torch.softmax"
    )
    attack = attack.replace(
        "x = x.contiguous()\n", "return self.op(x, 1)\n        x = x.contiguous()\n", 1
    )
    result = backend.check(softmax, attack)
    assert result.reason == "calls_replaced_operator", result.message
    assert "softmax" in result.message
