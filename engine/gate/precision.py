"""Which precision a candidate computes in (read from its source, to name it in results) and the
tolerance it is judged by: its measured error, never the instructions it uses.

Triton's `tl.dot` on fp32 inputs uses TF32 unless told otherwise; casting to fp16/bf16 lowers
precision too. A result names its precision so that speed from lower precision is never hidden.
"""

from __future__ import annotations

import ast
import functools
import math

# From least to most precise: a candidate is as precise as its least precise part.
PRECISION_ORDER = ("bf16", "fp16", "tf32", "tf32x3", "fp32")
DTYPE_PRECISION = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp32"}
LOW_PRECISION_NAMES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16"}


DOT_PRECISIONS = {"ieee": "fp32", "tf32x3": "tf32x3", "tf32": "tf32"}


def _strings_bound(tree: ast.Module) -> dict[str, set[str]]:
    """The strings each name is given: as a module constant (`KB_DOT_PRECISION = "ieee"`), then
    as a keyword of any call (a launch's `PRECISION=KB_DOT_PRECISION` binds the kernel's
    PRECISION parameter)."""
    bound: dict[str, set[str]] = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)):  # fmt: skip
            bound.setdefault(stmt.targets[0].id, set()).add(stmt.value.value)
    for node in ast.walk(tree):
        for k in node.keywords if isinstance(node, ast.Call) else ():
            if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                bound.setdefault(k.arg, set()).add(k.value.value)
            elif isinstance(k.value, ast.Name) and k.value.id in bound and k.arg:
                bound.setdefault(k.arg, set()).update(bound[k.value.id])
    return bound


def _dot_precision(call: ast.Call, bound: dict[str, set[str]]) -> str:
    """Precision of one `tl.dot` call on fp32 operands; an input precision given by name is the
    least precise string `bound` gives that name (tf32, TF32's default, when none)."""
    keywords = {k.arg: k.value for k in call.keywords}
    value = keywords.get("input_precision")
    if isinstance(value, ast.Constant) and value.value in DOT_PRECISIONS:
        return DOT_PRECISIONS[value.value]
    if isinstance(value, ast.Name):
        named = [DOT_PRECISIONS.get(v, "tf32") for v in bound.get(value.id, ())]
        return min(named or ["tf32"], key=PRECISION_ORDER.index)
    allow = keywords.get("allow_tf32")
    if value is None and isinstance(allow, ast.Constant) and allow.value is False:
        return "fp32"
    return "tf32"


def _lowered_to(call: ast.Call) -> list[str]:
    """The low precisions a call converts to: `x.half()`, or a low-precision dtype among its
    arguments (`.to(tl.bfloat16)`, `tl.cast(x, tl.float16)`, `dtype=torch.float16`). A dtype
    named anywhere else (a table from torch's dtypes to Triton's, `dtype in (torch.float16,
    torch.bfloat16)`) lowers nothing."""
    named = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(call.func, ast.Attribute):
        named.append(call.func)
    return [LOW_PRECISION_NAMES[n.attr] for n in named
            if isinstance(n, ast.Attribute) and n.attr in LOW_PRECISION_NAMES]  # fmt: skip


@functools.lru_cache(maxsize=64)  # the judge asks once a checked call: parse once a candidate
def infer_precision(source: str, input_dtype: str = "float32") -> str:
    """The precision (fp32, tf32, tf32x3, fp16, bf16) of a candidate fed `input_dtype` inputs."""
    found = [DTYPE_PRECISION.get(input_dtype, "fp32")]
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found[0]
    bound = _strings_bound(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += _lowered_to(node)
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name == "dot" and found[0] == "fp32":
                found.append(_dot_precision(node, bound))
    return min(found, key=PRECISION_ORDER.index)


def problem_tolerance(spec, precision: str) -> float:
    """The problem's own tolerance: one float for all precisions, or a dict by precision."""
    if spec is None:
        return 0.0
    if isinstance(spec, dict):
        return float(spec.get(precision, 0.0))
    return float(spec)


# A kernel's error may be this many times PyTorch's own error on the same inputs (both against
# float64): measured on the six built-in problems, fp32 kernels with another summation order and
# tf32x3 GEMMs stay within it, and a TF32 GEMM on fp32 inputs is two orders of magnitude beyond.
TORCH_ERROR_FACTOR = 2.0
# The largest relative error of one rounding to each output dtype. No kernel does better than
# correctly rounded outputs, but over a few outputs (a matvec's 4 at a derived tiny size) PyTorch's
# measured error can fall below one rounding by luck: it counts as at least this much, and a
# Model of n compute operators as at least sqrt(n) roundings (independent roundings add up so;
# on KernelBench's VisionTransformer, 73 operators at its tiny size, PyTorch measured 2
# roundings, a correct fp32 Triton rewrite 4.3).
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def gate_tolerance(
    spec, policy: str, dtype: str, precision: str, torch_error: float, operators: int = 1
) -> float:
    """The larger of the problem's tolerance and TORCH_ERROR_FACTOR times PyTorch's own error (at
    least the roundings of `operators` compute operators). Under strict, fp32 inputs are judged
    as fp32 whatever instructions the kernel uses (its measured error decides); under tf32 the
    problem's tolerance for the kernel's precision."""
    key = DTYPE_PRECISION.get(dtype, "fp32") if policy == "strict" else precision
    pytorch = max(torch_error, UNIT_ROUNDOFF.get(dtype, 0.0) * math.sqrt(max(operators, 1)))
    return max(problem_tolerance(spec, key), TORCH_ERROR_FACTOR * pytorch)


def join_precisions(precisions) -> str:
    """One label for a result that spans sizes of different dtypes, e.g. "fp16/fp32"."""
    return "/".join(dict.fromkeys(precisions)) or "fp32"
