"""Which precision a candidate computes in, read from its source, and the tolerance that follows.

Triton's `tl.dot` on fp32 inputs uses TF32 unless told otherwise; casting to fp16/bf16 lowers
precision too. A result names its precision so that speed from lower precision is never hidden.
"""

from __future__ import annotations

import ast

from engine.gate.reasons import Rejection

# From least to most precise: a candidate is as precise as its least precise part.
PRECISION_ORDER = ("bf16", "fp16", "tf32", "tf32x3", "fp32")
DTYPE_PRECISION = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp32"}
LOW_PRECISION_NAMES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16"}


def _dot_precision(call: ast.Call) -> str:
    """Precision of one `tl.dot` call on fp32 operands."""
    keywords = {k.arg: k.value for k in call.keywords}
    value = keywords.get("input_precision")
    if isinstance(value, ast.Constant) and value.value in ("ieee", "tf32x3", "tf32"):
        return "fp32" if value.value == "ieee" else value.value
    allow = keywords.get("allow_tf32")
    if value is None and isinstance(allow, ast.Constant) and allow.value is False:
        return "fp32"
    return "tf32"


def infer_precision(source: str, input_dtype: str = "float32") -> str:
    """The precision (fp32, tf32, tf32x3, fp16, bf16) of a candidate fed `input_dtype` inputs."""
    found = [DTYPE_PRECISION.get(input_dtype, "fp32")]
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in LOW_PRECISION_NAMES:
            found.append(LOW_PRECISION_NAMES[node.attr])
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name == "dot" and found[0] == "fp32":
                found.append(_dot_precision(node))
    return min(found, key=PRECISION_ORDER.index)


def policy_rejection(policy: str, precision: str) -> Rejection | None:
    """Why a kernel computing in `precision` breaks the session's precision policy, or None."""
    if policy != "strict" or precision not in ("tf32", "tf32x3"):
        return None
    how = {"tf32": 'tl.dot without input_precision="ieee"',
           "tf32x3": 'tl.dot with input_precision="tf32x3"'}[precision]  # fmt: skip
    return Rejection(
        "tf32_in_strict_session",
        f"this kernel computes in {precision} ({how}); the session is strict fp32: use "
        'input_precision="ieee", or run with --precision tf32',
    )


def problem_tolerance(spec, precision: str) -> float:
    """The problem's own tolerance: one float for all precisions, or a dict by precision."""
    if spec is None:
        return 0.0
    if isinstance(spec, dict):
        return float(spec.get(precision, 0.0))
    return float(spec)


def gate_tolerance(spec, precision: str, torch_error: float) -> float:
    """The larger of the problem's tolerance and twice PyTorch's own error on the same inputs."""
    return max(problem_tolerance(spec, precision), 2.0 * torch_error)


def join_precisions(precisions) -> str:
    """One label for a result that spans sizes of different dtypes, e.g. "fp16/fp32"."""
    return "/".join(dict.fromkeys(precisions)) or "fp32"
