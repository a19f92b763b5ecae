"""The correctness half of the gate. Runs INSIDE a worker process only: it executes the candidate.

Each check builds fresh inputs and models from one seed, computes a float64 reference, runs the
candidate with new allocations poisoned and replaced operators recorded, and raises
CandidateRejected for the first rule the output breaks.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from engine.gate.precision import gate_tolerance
from engine.problems.loader import call_with_size
from engine.problems.trace import OperatorRecorder, canonical_op

ALLOCATORS = frozenset({"empty", "empty_like", "empty_strided", "new_empty"})
# Poison values: NaN first; a finite value on the second run tells unwritten from computed NaN.
NAN_POISON, FINITE_POISON = math.nan, 0.0
# Elements per slice when measuring error, so full-size float64 temporaries stay small.
ERROR_CHUNK = 1 << 26


class CandidateRejected(Exception):
    """The candidate broke a rule of the gate; `reason` is a code from engine.gate.reasons."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class PoisonAllocations(TorchFunctionMode):
    """Fills every tensor from empty/empty_like/empty_strided/new_empty with a poison value."""

    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if canonical_op(func) in ALLOCATORS and isinstance(out, torch.Tensor) and out.numel():
            if out.is_floating_point() or out.is_complex():
                out.fill_(self.value)
            elif out.dtype != torch.bool:
                out.fill_(torch.iinfo(out.dtype).max)
        return out


@dataclass
class SeedCheck:
    """What one passing check measured."""

    error: float
    tolerance: float
    fingerprint: tuple[float, ...]


def as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def reference_precision(policy: str) -> None:
    """PyTorch's TF32 switches for the reference Model under the session's precision policy:
    its defaults under strict (fp32 matmuls in fp32), TF32 for matmuls and convolutions under
    tf32, so that a TF32 kernel is compared with eager at TF32."""
    torch.backends.cuda.matmul.allow_tf32 = policy == "tf32"
    torch.backends.cudnn.allow_tf32 = True  # convolutions: PyTorch's default already


def make_inputs(problem_module, params: dict, seed: int, device: str) -> list:
    """The problem's inputs for one seed, generated directly on `device`."""
    torch.manual_seed(seed)
    with torch.device(device):
        return list(call_with_size(problem_module.get_inputs, params))


def build_models(problem_module, candidate_module, params: dict, seed: int, device: str):
    """Model and ModelNew from the same seed; ModelNew gets Model's weights when they fit."""
    init = list(call_with_size(problem_module.get_init_inputs, params))
    with torch.device(device):
        torch.manual_seed(seed)
        model = problem_module.Model(*init).eval()
        torch.manual_seed(seed)
        model_new = candidate_module.ModelNew(*init)
    if isinstance(model_new, torch.nn.Module):
        model_new.eval()
        mine, theirs = model_new.state_dict(), model.state_dict()
        if mine.keys() == theirs.keys() and all(mine[k].shape == theirs[k].shape for k in mine):
            model_new.load_state_dict(theirs)
    return model, model_new


def normalized_error(out: torch.Tensor, ref64: torch.Tensor) -> float:
    """||out - ref64|| / ||ref64||, in float64, a slice at a time."""
    a, b = out.reshape(-1), ref64.reshape(-1)
    diff_sq = ref_sq = 0.0
    for start in range(0, b.numel(), ERROR_CHUNK):
        x = a[start : start + ERROR_CHUNK].double()
        y = b[start : start + ERROR_CHUNK]
        diff_sq += float(torch.sum((x - y) ** 2))
        ref_sq += float(torch.sum(y * y))
    if ref_sq == 0.0:
        return 0.0 if diff_sq == 0.0 else math.inf
    return math.sqrt(diff_sq / ref_sq)


def reference_float64(model, inputs: list) -> list[torch.Tensor]:
    model64 = copy.deepcopy(model).double()
    inputs64 = [x.double() if _is_float(x) else x for x in inputs]
    with torch.no_grad():
        return [o.double() for o in as_list(model64(*inputs64))]


def run_candidate(model_new, inputs: list, poison: float):
    """One forward call with allocations poisoned and operator calls recorded."""
    with torch.no_grad(), OperatorRecorder() as recorder, PoisonAllocations(poison):
        out = model_new(*inputs)
    if inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].is_cuda:
        torch.cuda.synchronize()
    return out, recorder.ops


def check_outputs(
    model,
    model_new,
    inputs: list,
    replaced: frozenset[str],
    tolerance_spec,
    precision: str,
    earlier: list[tuple[float, ...]] = (),
) -> SeedCheck:
    """Run the candidate once on `inputs`; raise CandidateRejected or return what it measured."""
    ref64 = reference_float64(model, inputs)
    with torch.no_grad():
        expected = as_list(model(*inputs))
    torch_error = max(normalized_error(e, r) for e, r in zip(expected, ref64, strict=True))
    saved = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    out, ops = run_candidate(model_new, inputs, NAN_POISON)
    called = [op for op in ops if op in replaced]
    if called:
        raise CandidateRejected(
            "calls_replaced_operator",
            f"at run time ModelNew.forward called torch `{'`, `'.join(called)}`, which this "
            "problem replaces (operators such as `/` and `@` on tensors count); compute it in "
            "a @triton.jit kernel",
        )
    outputs = _check_structure(out, expected)
    for i, (before, after) in enumerate(zip(saved, inputs, strict=True)):
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            raise CandidateRejected(
                "mutates_input",
                f"input {i} was modified by forward; write results to a new tensor "
                "(torch.empty_like) instead of in place",
            )
    for i, (o, r) in enumerate(zip(outputs, ref64, strict=True)):
        _check_finite(model_new, inputs, i, o, r)
        _check_not_constant(i, o, r)
    fingerprint = tuple(float(o.sum(dtype=torch.float64)) for o in outputs)
    if fingerprint in earlier:
        raise CandidateRejected(
            "stale_output",
            "returned the same output as for an earlier, different input; compute the output "
            "from this call's inputs, never from a cache",
        )
    error = max(normalized_error(o, r) for o, r in zip(outputs, ref64, strict=True))
    tolerance = gate_tolerance(tolerance_spec, precision, torch_error)
    if not error <= tolerance:
        raise CandidateRejected(
            "wrong_output",
            f"normalized error {error:.3g} exceeds the tolerance {tolerance:.3g} "
            f"(PyTorch's own error: {torch_error:.3g}, precision {precision}); compare the "
            "kernel's math with Model.forward",
        )
    return SeedCheck(error, tolerance, fingerprint)


def _is_float(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _check_structure(out, expected: list) -> list[torch.Tensor]:
    outputs = as_list(out)
    if len(outputs) != len(expected) or not all(isinstance(o, torch.Tensor) for o in outputs):
        kinds = ", ".join(type(o).__name__ for o in outputs)
        raise CandidateRejected(
            "bad_output_type",
            f"forward returned ({kinds}); the reference returns {len(expected)} tensor(s)",
        )
    for i, (o, e) in enumerate(zip(outputs, expected, strict=True)):
        if o.shape != e.shape:
            raise CandidateRejected(
                "wrong_shape",
                f"output {i} has shape {tuple(o.shape)}; the reference's is {tuple(e.shape)}",
            )
        if o.dtype != e.dtype:
            raise CandidateRejected(
                "bad_output_type",
                f"output {i} has dtype {o.dtype}; the reference's is {e.dtype}: return the "
                "reference's dtype (cast inside the kernel when storing)",
            )
    return outputs


def _check_finite(model_new, inputs, i: int, out: torch.Tensor, ref64: torch.Tensor) -> None:
    bad = ~torch.isfinite(out) & torch.isfinite(ref64)
    count = int(bad.sum())
    if not count:
        return
    again = as_list(run_candidate(model_new, inputs, FINITE_POISON)[0])[i]
    still = int((~torch.isfinite(again) & torch.isfinite(ref64)).sum())
    if still < count:
        raise CandidateRejected(
            "unwritten_output",
            f"{count - still} of {out.numel()} elements of output {i} were never written (they "
            "kept the NaN poison of torch.empty); cover the whole output with the grid and "
            "masks, or read only memory the kernel initialised",
        )
    raise CandidateRejected(
        "nan_output",
        f"{count} of {out.numel()} elements of output {i} are NaN or Inf where the reference "
        "is finite; check for overflow, division by zero and masked loads without `other=`",
    )


def _check_not_constant(i: int, out: torch.Tensor, ref64: torch.Tensor) -> None:
    if out.numel() < 2:
        return
    flat, ref = out.reshape(-1), ref64.reshape(-1)
    if bool((flat == flat[0]).all()) and not bool((ref == ref[0]).all()):
        value = float(flat[0])
        what = "all zeros" if value == 0 else f"the constant {value:g}"
        raise CandidateRejected(
            "constant_output",
            f"output {i} is {what}; the reference is not constant: the kernel must compute "
            "and store the result",
        )
