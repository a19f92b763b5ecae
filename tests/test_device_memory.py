"""An evaluation fits the device's memory as it finds it: a float64 reference that a checked call
would not fit beside waits in host memory, a timing rotates over fewer input sets, and the
verdict says so. The figures are rmsnorm's full size on the cards it runs on (7 GiB a tensor)."""

import pytest
import torch

from engine import settings
from engine.backends.local import LocalBackend
from engine.gate import correctness
from engine.gate.correctness import compute_reference, reference_float64
from engine.problems import load_problem
from engine.worker import Timeouts
from engine.worker.device_memory import input_sets_that_fit, reference_to_host
from tests.adversarial import softmax as attacks
from tests.test_judge_adversarial import TIMING, judge

GIB = 1 << 30
U = 7 * GIB  # one rmsnorm tensor at 112x64x512x512 fp32


def test_a_reference_waits_in_host_memory_only_where_a_checked_call_would_not_fit():
    # An H100 (80 GB) after rmsnorm's reference: about 49 GiB free; an H200 (141 GB): about 109.
    assert reference_to_host(U, U, free=49 * GIB)
    assert not reference_to_host(U, U, free=109 * GIB)


def test_timing_input_sets_are_as_many_as_fit_and_never_none():
    assert input_sets_that_fit(4, U, U, free=130 * GIB) == 4  # the H200: all of rung 2's
    assert input_sets_that_fit(4, U, U, free=76 * GIB) == 1  # the H100
    assert input_sets_that_fit(4, U, U, free=0) == 1
    assert input_sets_that_fit(2, 1 << 20, 1 << 20, free=2 * GIB) == 2  # small sizes: unchanged
    fits = [input_sets_that_fit(8, U, U, free=g * GIB) for g in range(0, 400, 10)]
    assert fits == sorted(fits) and fits[-1] == 8


def test_the_checks_read_a_reference_a_slice_at_a_time_as_whole(monkeypatch):
    """The error, the non-finite count and the constant check, over slices that a reference in
    host memory crosses one at a time (here on the cpu, both sides host tensors: this pins the
    slicing, not the copy), give what the whole tensors give."""

    class Softmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)

    torch.manual_seed(0)
    reference = compute_reference(Softmax(), [torch.randn(64, 96)])
    out, ref64 = reference.expected[0], reference.ref64[0]
    whole = correctness.normalized_error(out, ref64)
    monkeypatch.setattr(correctness, "ERROR_CHUNK", 100)  # 62 slices, the last one short
    assert correctness.normalized_error(out, ref64) == pytest.approx(whole)
    holed = out.clone()
    holed.view(-1)[[5, 6000]] = float("nan")
    assert correctness.nonfinite_count(holed, ref64) == 2
    # A finite output is settled without the reference crossing (a meta tensor cannot cross).
    assert correctness.nonfinite_count(out, ref64.to("meta")) == 0
    with pytest.raises(correctness.CandidateRejected, match="all zeros"):
        correctness.check_not_constant(0, torch.zeros_like(out), ref64, out)
    zeros = torch.zeros(2)
    correctness.check_not_constant(0, zeros, zeros.double(), zeros)
    assert reference.ref_print == correctness.fingerprint(reference.ref64)


@pytest.fixture(scope="module")
def short_backend():
    """A cpu judge started with the whole machine's memory kept for other work."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(settings.DEVICE_RESERVE_GB, "1000000")
        short = LocalBackend("cpu", timeouts=Timeouts(compile_s=30, run_s=30, time_s=60))
        judge(short, load_problem("softmax"), attacks.VALID)  # the judge starts with it set
    yield short
    short.close()


def test_a_judge_short_of_memory_times_over_fewer_input_sets_and_says_so(
    backend, short_backend, softmax
):
    """With the whole machine's memory kept for other work, the real judge times the candidate
    over one input set of two, every repetition still taken and checked, and the verdict says
    why; with none kept it uses both and says nothing."""
    roomy = judge(backend, softmax, attacks.VALID, TIMING)
    assert roomy.passed and roomy.message == "", roomy.message
    result = judge(short_backend, softmax, attacks.VALID, TIMING)
    assert result.passed, result.message
    assert result.message == (
        "timed over 1 of 2 input sets at tiny: the device's free memory holds no more"
    )
    assert len(result.timings[0].samples_ms) == TIMING["reps"]


def test_a_memo_across_the_one_input_set_left_is_still_caught(short_backend, softmax):
    """One input set rotates onto itself: its contents change at every rotation, so an output
    kept from an earlier call still fails the fetch checks."""
    result = judge(short_backend, softmax, attacks.MEMOISES_BY_ADDRESS, {**TIMING, "reps": 12})
    assert result.reason == "stale_output", result.message


def test_a_float64_reference_that_runs_out_of_gpu_memory_is_computed_in_host_memory():
    """The Model's first float64 call fails as a full GPU fails it; the reference comes from a
    second call in host memory, equal to an unhindered one."""
    calls = []  # outside the Model: the reference calls deep copies of it

    class FailsOnce(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(96))

        def forward(self, x):
            calls.append(x.dtype)
            if len(calls) == 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
            return torch.softmax(x * self.scale, dim=1)

    model, x = FailsOnce(), torch.randn(64, 96)
    [again] = reference_float64(model, [x])
    assert calls == [torch.float64] * 2
    assert again.dtype == torch.float64 and again.device.type == "cpu"
    [plain] = reference_float64(model, [x])
    assert torch.equal(again, plain)
