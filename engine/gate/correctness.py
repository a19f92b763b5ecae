"""The correctness half of the gate, on the judge's side: inputs, the float64 reference, and the
rules an output rebuilt from a runner's bytes must meet. Nothing here runs candidate code."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

from engine.gate.precision import gate_tolerance
from engine.runner.calls import call_with_size, draw_alike

# Elements per slice when measuring error, so full-size float64 temporaries stay small.
ERROR_CHUNK = 1 << 26


class CandidateRejected(Exception):
    """The candidate broke a rule of the gate; `reason` is a code from engine.gate.reasons."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Reference:
    """What the judge keeps for one input set: its own copy of the inputs, the float64 reference
    (on the device, or in host memory where the device is short of it), PyTorch's own output at
    its defaults, that output's error and the fingerprints of the reference and of that output."""

    inputs: list
    ref64: list[torch.Tensor]
    expected: list[torch.Tensor]
    torch_error: float
    ref_print: tuple[float, ...]
    expected_print: tuple[float, ...]


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


def build_model(problem_module, params: dict, seed: int, device: str, draws: bool = False):
    """The reference Model and its init arguments; its weights travel to the candidate. With
    `draws` (the Model draws random numbers), each call starts from DRAW_SEED."""
    init = list(call_with_size(problem_module.get_init_inputs, params))
    with torch.device(device):
        torch.manual_seed(seed)
        model = problem_module.Model(*init).eval()
    if draws:
        draw_alike(model)
    return model, init


def slices(out: torch.Tensor, ref64: torch.Tensor):
    """Aligned flat slices of an output and its reference, the reference's on the output's
    device (a reference kept in host memory crosses a slice at a time)."""
    a, b = out.reshape(-1), ref64.reshape(-1)
    for start in range(0, b.numel(), ERROR_CHUNK):
        yield a[start : start + ERROR_CHUNK], b[start : start + ERROR_CHUNK].to(a.device)


def normalized_error(out: torch.Tensor, ref64: torch.Tensor) -> float:
    """||out - ref64|| / ||ref64||, in float64, a slice at a time."""
    diff_sq = ref_sq = 0.0
    for x, y in slices(out, ref64):
        x = x.double()
        diff_sq += float(torch.sum((x - y) ** 2))
        ref_sq += float(torch.sum(y * y))
    if ref_sq == 0.0:
        return 0.0 if diff_sq == 0.0 else math.inf
    return math.sqrt(diff_sq / ref_sq)


def reference_float64(model, inputs: list) -> list[torch.Tensor]:
    """The Model's outputs in float64, on the inputs' device; computed in host memory instead
    where the GPU runs out of memory for it (a float64 copy of a 7 GiB input and its
    temporaries outgrew what an 80 GB GPU had left beside the evaluation)."""
    try:
        return _float64_on(model, inputs, None)
    except torch.OutOfMemoryError:
        pass  # out of this block first: the failed try's tensors go with the exception
    torch.cuda.empty_cache()
    return _float64_on(model, inputs, "cpu")


def _float64_on(model, inputs: list, device: str | None) -> list[torch.Tensor]:
    model64 = copy.deepcopy(model).to(device=device, dtype=torch.float64)
    moved = [x.to(device) if isinstance(x, torch.Tensor) and device else x for x in inputs]
    inputs64 = [x.double() if _is_float(x) else x for x in moved]
    with torch.no_grad():
        try:
            return [o.double() for o in as_list(model64(*inputs64))]
        except RuntimeError:
            with UpcastOperands():  # the float32 tensors that `.to(float64)` cannot reach
                return [o.double() for o in as_list(model64(*inputs64))]


class UpcastOperands(TorchFunctionMode):
    """Every operator takes its float operands in float64: for a Model whose forward makes
    float32 tensors of its own (an LSTM's `torch.randn` initial state) or reaches modules that a
    copy does not (minGPT's MLP, a lambda closed over the original's layers). The tensor an
    in-place operator writes keeps its dtype, so that the write lands."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        in_place = getattr(func, "__name__", "").endswith("_") and args
        first, rest = (args[:1], args[1:]) if in_place else ((), args)
        rest, kwargs = pytree.tree_map(_to_float64, (rest, kwargs))
        return func(*first, *rest, **kwargs)


def _to_float64(x):
    return x.double() if _is_float(x) and x.dtype != torch.float64 else x


def compute_reference(model, inputs: list) -> Reference:
    ref64 = reference_float64(model, inputs)
    with torch.no_grad():
        expected = as_list(model(*inputs))
    torch_error = max(normalized_error(e, r) for e, r in zip(expected, ref64, strict=True))
    saved = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    return Reference(saved, ref64, expected, torch_error, fingerprint(ref64), fingerprint(expected))


def check_structure(described: list, expected: list[torch.Tensor]) -> None:
    """The runner's description of its outputs against the reference's: count, type, shape,
    dtype (the bytes are checked against these when the judge reads them)."""
    kinds = [d.get("type", "Tensor") if isinstance(d, dict) else "?" for d in described]
    if len(described) != len(expected) or any(k != "Tensor" for k in kinds):
        raise CandidateRejected(
            "bad_output_type",
            f"forward returned ({', '.join(kinds)}); the reference returns {len(expected)} "
            "tensor(s)",
        )
    for i, (d, e) in enumerate(zip(described, expected, strict=True)):
        shape, dtype = d["tensor"].get("shape"), d["tensor"].get("dtype")
        if shape != list(e.shape):
            raise CandidateRejected(
                "wrong_shape", f"output {i} has shape {shape}; the reference's is {list(e.shape)}"
            )
        if dtype != str(e.dtype).removeprefix("torch."):
            raise CandidateRejected(
                "bad_output_type",
                f"output {i} has dtype {dtype}; the reference's is {e.dtype}: return the "
                "reference's dtype (cast inside the kernel when storing)",
            )


def check_inputs_unchanged(reference: Reference, after: list) -> None:
    for i, (before, now) in enumerate(zip(reference.inputs, after, strict=True)):
        if isinstance(before, torch.Tensor) and not torch.equal(before, now.to(before.device)):
            raise CandidateRejected(
                "mutates_input",
                f"input {i} was modified by forward; write results to a new tensor "
                "(torch.empty_like) instead of in place",
            )


def nonfinite_count(out: torch.Tensor, ref64: torch.Tensor) -> int:
    """Elements that are NaN or Inf where the reference is finite. An output finite everywhere
    is settled on its own device: a reference in host memory does not cross for it."""
    if bool(torch.isfinite(out).all()):
        return 0
    return sum(int((~torch.isfinite(x) & torch.isfinite(y)).sum()) for x, y in slices(out, ref64))


def unwritten_or_nan(i: int, numel: int, with_nan: int, with_finite_poison: int):
    """The rejection for output `i` holding `with_nan` non-finite elements under NaN poison and
    `with_finite_poison` under a finite one: the difference was never written."""
    if with_finite_poison < with_nan:
        return CandidateRejected(
            "unwritten_output",
            f"{with_nan - with_finite_poison} of {numel} elements of output {i} were never "
            "written (they kept the NaN poison of torch.empty); cover the whole output with the "
            "grid and masks, or read only memory the kernel initialised",
        )
    return CandidateRejected(
        "nan_output",
        f"{with_nan} of {numel} elements of output {i} are NaN or Inf where the reference "
        "is finite; check for overflow, division by zero and masked loads without `other=`",
    )


def check_not_constant(i: int, out: torch.Tensor, ref64: torch.Tensor, expected: torch.Tensor):
    """Raise where output i holds one value everywhere and neither reference does: the float64
    one, nor PyTorch's own (one plus a shift below fp32's resolution is all ones there)."""
    if out.numel() < 2:
        return
    flat, first = out.reshape(-1), ref64.reshape(-1)[0].item()
    if not bool((flat == flat[0]).all()) or bool((expected.reshape(-1) == flat[0]).all()):
        return
    if not all(bool((y == first).all()) for _, y in slices(out, ref64)):
        value = float(flat[0])
        what = "all zeros" if value == 0 else f"the constant {value:g}"
        raise CandidateRejected(
            "constant_output",
            f"output {i} is {what}; the reference is not constant: the kernel must compute "
            "and store the result",
        )


def fingerprint(outputs: list[torch.Tensor]) -> tuple[float, ...]:
    """Each tensor's sum and 2-norm in float64: a softmax's sum is the same for every input."""
    prints = []
    for o in outputs:
        x = o if o.is_floating_point() else o.to(torch.float64)  # indices: small
        prints += [float(x.sum(dtype=torch.float64)),
                   float(torch.linalg.vector_norm(x, dtype=torch.float64))]  # fmt: skip
    return tuple(prints)


def check_error(outputs, reference: Reference, request, policy: str, precision: str):
    """(error, tolerance) when the outputs are within the tolerance of the judge's `request`;
    raises wrong_output else."""
    error = max(normalized_error(o, r) for o, r in zip(outputs, reference.ref64, strict=True))
    dtype = str(reference.expected[0].dtype).removeprefix("torch.")
    tolerance = gate_tolerance(
        request.tolerance, policy, dtype, precision, reference.torch_error, request.operators
    )
    if not error <= tolerance:
        raise CandidateRejected(
            "wrong_output",
            f"normalized error {error:.3g} exceeds the tolerance {tolerance:.3g} "
            f"(PyTorch's own error: {reference.torch_error:.3g}, {policy} precision policy); "
            "compare the kernel's math with Model.forward",
        )
    return error, tolerance


def _is_float(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()
