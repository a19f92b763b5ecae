"""Elementwise operators (arithmetic, comparisons, activations, `where`, strided copies) through
one kernel: operands are read through their own strides (broadcast ones through an expanded
view's zero strides, never materialised), Python scalars are kernel scalars, and the result is
written through the output's strides (contiguous, or a view being assigned to)."""

import functools
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_INTERPRETER_TILE,
    kb_broadcast_shapes,
    kb_cdiv,
    kb_interpreted,
    kb_is_tensor,
    kb_next_power_of_2,
)

# Elements per program: 4 warps of 32 threads, 8 elements each.
_ELEMENTWISE_BLOCK = 1024
# Past this offset a kernel indexes in int64.
_ELEMENTWISE_INT32_MAX = 2**31 - 1

_ELEMENTWISE_TL_DTYPES = {
    torch.float32: tl.float32,
    torch.float64: tl.float64,
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.int8: tl.int8,
    torch.int16: tl.int16,
    torch.int32: tl.int32,
    torch.int64: tl.int64,
    torch.uint8: tl.uint8,
    torch.bool: tl.int1,
}


@triton.jit
def _elementwise_clamp(x, low, high):
    """low <= x <= high, NaN kept (as torch.clamp)."""
    x = tl.where(x < low, low, x)
    return tl.where(x > high, high, x)


@triton.jit
def _elementwise_tanh(x):
    """tanh without libdevice (absent in the interpreter): its Taylor series in x*x near zero,
    where 1 - exp(-2|x|) cancels, and (1 - e) / (1 + e) with e = exp(-2|x|) beyond."""
    z = x * x
    series = 0.000590027440945586 * z - 0.0014558343870513183
    series = series * z + 0.003592128036572481
    series = series * z - 0.008863235529902197
    series = series * z + 0.021869488536155203
    series = series * z - 0.05396825396825397
    series = series * z + 0.13333333333333333
    series = series * z - 0.3333333333333333
    series = series * z + 1.0
    e = tl.exp(-2.0 * tl.abs(x))
    far = tl.where(x < 0, -1.0, 1.0) * (1.0 - e) / (1.0 + e)
    return tl.where(tl.abs(x) < 0.55, x * series, far)


@triton.jit
def _elementwise_softplus(x, beta, threshold):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x exceeds threshold (as torch)."""
    scaled = x * beta
    return tl.where(scaled > threshold, x, tl.log(1.0 + tl.exp(scaled)) / beta)


@triton.jit
def _elementwise_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _elementwise_unary(x, p0, p1, OP: tl.constexpr):
    """One operand's op, computed in x's dtype; p0 and p1 are the op's scalar parameters."""
    if OP == "copy":
        r = x
    elif OP == "neg":
        r = -x
    elif OP == "abs":
        r = tl.abs(x)
    elif OP == "exp":
        r = tl.exp(x)
    elif OP == "log":
        r = tl.log(x)
    elif OP == "sqrt":
        r = tl.sqrt_rn(x)
    elif OP == "rsqrt":
        r = tl.div_rn(1.0, tl.sqrt_rn(x))
    elif OP == "sin":
        r = tl.sin(x)
    elif OP == "cos":
        r = tl.cos(x)
    elif OP == "erf":
        r = tl.erf(x)
    elif OP == "tanh":
        r = _elementwise_tanh(x)
    elif OP == "sigmoid":
        r = tl.sigmoid(x)
    elif OP == "relu":
        r = tl.where(x < 0, 0, x)
    elif OP == "clamp":
        r = _elementwise_clamp(x, p0, p1)
    elif OP == "clamp_min":
        r = tl.where(x < p0, p0, x)
    elif OP == "clamp_max":
        r = tl.where(x > p0, p0, x)
    elif OP == "gelu":
        r = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif OP == "gelu_tanh":
        r = 0.5 * x * (1.0 + _elementwise_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    elif OP == "silu":
        r = x * tl.sigmoid(x)
    elif OP == "softplus":
        r = _elementwise_softplus(x, p0, p1)
    elif OP == "mish":
        r = x * _elementwise_tanh(_elementwise_softplus(x, 1.0, 20.0))
    elif OP == "leaky_relu":
        r = tl.where(x > 0, x, x * p0)
    elif OP == "elu":
        r = tl.where(x > 0, x, p0 * (tl.exp(x) - 1.0))
    elif OP == "hardsigmoid":
        r = _elementwise_clamp(x + 3.0, 0.0, 6.0) / 6.0
    elif OP == "hardswish":
        r = x * _elementwise_clamp(x + 3.0, 0.0, 6.0) / 6.0
    elif OP == "logical_not":
        r = x == 0
    elif OP == "bitwise_not":
        r = ~x
    elif OP == "reciprocal":
        r = 1.0 / x
    elif OP == "square":
        r = x * x
    elif OP == "cube":
        r = x * x * x
    else:
        tl.static_assert(OP == "reciprocal_square", "unknown elementwise op")
        r = 1.0 / (x * x)
    return r


@triton.jit
def _elementwise_pow(x, y):
    """x ** y for floats without libdevice.pow (absent in the interpreter): |x| ** y through
    exp2 and log2, the sign of a negative base kept for odd integer exponents, NaN for other
    exponents of one, and x ** 0 == 1 ** y == 1."""
    magnitude = tl.exp2(y * tl.log2(tl.abs(x)))
    integral = y == tl.floor(y)
    odd = integral & (y % 2.0 != 0)
    signed = tl.where(odd, -magnitude, magnitude)
    r = tl.where(x < 0, tl.where(integral, signed, float("nan")), magnitude)
    return tl.where((y == 0) | (x == 1), 1.0, r)


@triton.jit
def _elementwise_floor_divide(x, y, FLOAT: tl.constexpr):
    """x // y rounded toward minus infinity; floats as torch computes them (from fmod)."""
    if FLOAT:
        mod = x % y
        quotient = (x - mod) / y
        quotient = tl.where((mod != 0) & ((y < 0) != (mod < 0)), quotient - 1.0, quotient)
        floored = tl.floor(quotient)
        floored = tl.where(quotient - floored > 0.5, floored + 1.0, floored)
        r = tl.where(y == 0, x / y, floored)
    else:
        quotient = x // y  # rounds toward zero in Triton, as in C
        r = tl.where((x % y != 0) & ((x < 0) != (y < 0)), quotient - 1, quotient)
    return r


@triton.jit
def _elementwise_binary(x, y, p0, OP: tl.constexpr, FLOAT: tl.constexpr):
    """Two operands' op, computed in their common dtype; p0 is add's and sub's alpha."""
    if OP == "add":
        r = x + p0 * y
    elif OP == "sub":
        r = x - p0 * y
    elif OP == "mul":
        r = x * y
    elif OP == "div":
        r = x / y
    elif OP == "div_trunc":
        if FLOAT:
            r = _elementwise_trunc(x / y)
        else:
            r = x // y
    elif OP == "div_floor":
        r = _elementwise_floor_divide(x, y, FLOAT)
    elif OP == "remainder":
        mod = x % y  # fmod for floats, C's remainder for integers: the dividend's sign
        r = tl.where((mod != 0) & ((mod < 0) != (y < 0)), mod + y, mod)
    elif OP == "pow":
        r = _elementwise_pow(x, y)
    elif OP == "maximum":
        r = tl.where((x > y) | (x != x), x, y)
    elif OP == "minimum":
        r = tl.where((x < y) | (x != x), x, y)
    elif OP == "eq":
        r = x == y
    elif OP == "ne":
        r = x != y
    elif OP == "lt":
        r = x < y
    elif OP == "le":
        r = x <= y
    elif OP == "gt":
        r = x > y
    elif OP == "ge":
        r = x >= y
    elif OP == "bitwise_and":
        r = x & y
    elif OP == "bitwise_or":
        r = x | y
    elif OP == "logical_and":
        r = (x != 0) & (y != 0)
    else:
        tl.static_assert(OP == "logical_or", "unknown elementwise op")
        r = (x != 0) | (y != 0)
    return r


@triton.jit
def _elementwise_load(operand, offsets, mask, IS_SCALAR: tl.constexpr, COMPUTE: tl.constexpr,
                      BLOCK: tl.constexpr):  # fmt: skip
    """A block of one operand in the compute dtype: loaded, or a Python scalar splatted."""
    if IS_SCALAR:
        values = tl.full([BLOCK], operand, COMPUTE)
    else:
        # Masked-off lanes read 1, so that no lane divides by zero or takes log(0).
        values = tl.load(operand + offsets, mask=mask, other=1).to(COMPUTE)
    return values


@triton.jit
def _elementwise_kernel(
    out_ptr, x, y, z, p0, p1, n, shape, out_strides, x_strides, y_strides, z_strides,
    OP: tl.constexpr, ARITY: tl.constexpr, X_SCALAR: tl.constexpr, Y_SCALAR: tl.constexpr,
    Z_SCALAR: tl.constexpr, COMPUTE: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """out = OP(x[, y[, z]]) over `shape` (dims collapsed by the launcher); arity 3 is where(x,
    y, z). Each flat index is split into one index per dim, innermost first, and each operand
    (and out) is addressed through its own strides."""
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    flat = pid * BLOCK + tl.arange(0, BLOCK)
    mask = flat < n
    rest = flat
    out_offsets = tl.zeros_like(flat)
    x_offsets = tl.zeros_like(flat)
    y_offsets = tl.zeros_like(flat)
    z_offsets = tl.zeros_like(flat)
    for d in tl.static_range(len(shape) - 1, -1, -1):
        if d == 0:
            index = rest
        else:
            index = rest % shape[d]
            rest = rest // shape[d]
        out_offsets += index * out_strides[d]
        x_offsets += index * x_strides[d]
        y_offsets += index * y_strides[d]
        z_offsets += index * z_strides[d]
    xv = _elementwise_load(x, x_offsets, mask, X_SCALAR, COMPUTE, BLOCK)
    if ARITY == 1:
        r = _elementwise_unary(xv, p0, p1, OP)
    elif ARITY == 2:
        yv = _elementwise_load(y, y_offsets, mask, Y_SCALAR, COMPUTE, BLOCK)
        r = _elementwise_binary(xv, yv, p0, OP, COMPUTE.is_floating())
    else:
        yv = _elementwise_load(y, y_offsets, mask, Y_SCALAR, COMPUTE, BLOCK)
        zv = _elementwise_load(z, z_offsets, mask, Z_SCALAR, COMPUTE, BLOCK)
        r = tl.where(xv != 0, yv, zv)
    tl.store(out_ptr + out_offsets, r.to(out_ptr.dtype.element_ty), mask=mask)


def _elementwise_compute_dtype(dtype: torch.dtype):
    """The Triton dtype a kernel computes `dtype` values in: fp16 and bf16 in fp32, as torch."""
    if dtype in (torch.float16, torch.bfloat16):
        return tl.float32
    if dtype not in _ELEMENTWISE_TL_DTYPES:
        raise NotImplementedError(f"elementwise kernels do not support {dtype}")
    return _ELEMENTWISE_TL_DTYPES[dtype]


def _elementwise_view(operand, shape):
    """(value, strides) for the kernel: a Python scalar with zero strides, a tensor expanded to
    `shape`, or a (tensor, strides) pair as given (a reversed read for flip)."""
    if isinstance(operand, tuple):
        return operand
    if kb_is_tensor(operand):
        expanded = operand.expand(shape)
        return expanded, expanded.stride()
    return operand, (0,) * len(shape)


def _elementwise_collapse(shape, strides):
    """Drop dims of size one and merge each dim into the next where every operand steps through
    the pair as one dim; returns (shape, one strides tuple per operand), at least one dim."""
    dims = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        steps = [s[d] for s in strides]
        if dims and all(
            outer == step * size for outer, step in zip(dims[-1][1], steps, strict=True)
        ):
            dims[-1] = (dims[-1][0] * size, steps)
        else:
            dims.append((size, steps))
    if not dims:
        dims = [(1, [0] * len(strides))]
    per_operand = [tuple(steps[i] for _, steps in dims) for i in range(len(strides))]
    return tuple(size for size, _ in dims), per_operand


@functools.lru_cache(maxsize=1024)
def _elementwise_plan(shape, strides):
    """_elementwise_collapse's (shape, strides per operand) and the farthest offset an operand
    reaches: a model calls its launchers with the same layouts every time, so this is kept."""
    dims, per_operand = _elementwise_collapse(shape, strides)
    extent = max(
        sum((size - 1) * abs(step) for size, step in zip(dims, s, strict=True)) for s in per_operand
    )
    return dims, tuple(per_operand), extent


def _elementwise_launch(op, out, operands, compute, p0=0, p1=0):
    """Write op(*operands) into `out` (any strides) elementwise, computing in `compute`; each
    operand broadcasts to out's shape (see _elementwise_view). Returns out."""
    n = out.numel()
    if n == 0:
        return out
    shape = tuple(out.shape)
    views = [_elementwise_view(operand, shape) for operand in operands]
    views += [(0, (0,) * len(shape))] * (3 - len(views))
    dims, strides, extent = _elementwise_plan(shape, (out.stride(), *(s for _, s in views)))
    (x, _), (y, _), (z, _) = views
    block = _ELEMENTWISE_BLOCK
    if kb_interpreted(out):
        block = min(kb_next_power_of_2(n), KB_INTERPRETER_TILE)
    _elementwise_kernel[(kb_cdiv(n, block),)](
        out, x, y, z, p0, p1, n, dims, *strides,
        OP=op, ARITY=len(operands), X_SCALAR=not kb_is_tensor(x), Y_SCALAR=not kb_is_tensor(y),
        Z_SCALAR=not kb_is_tensor(z), COMPUTE=compute,
        WIDE=max(n, extent) > _ELEMENTWISE_INT32_MAX, BLOCK=block,
    )  # fmt: skip
    return out


def _elementwise_result_type(a, b) -> torch.dtype:
    """torch's type promotion of two operands, at least one of them a tensor."""
    if not kb_is_tensor(a) and not kb_is_tensor(b):
        a = torch.tensor(a)  # where's two scalar branches: promoted as torch.where does
    return torch.result_type(a, b)


def _elementwise_new(operands, dtype):
    """An empty contiguous result in the broadcast shape of the tensor operands."""
    tensors = [t for t in operands if kb_is_tensor(t)]
    shape = kb_broadcast_shapes(*(t.shape for t in tensors))
    return torch.empty(shape, dtype=dtype, device=tensors[0].device)


def _elementwise_float(dtype: torch.dtype) -> torch.dtype:
    """The dtype of a floating-point result from `dtype` operands (integers give the default)."""
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def _elementwise_binary_op(op, a, b, p0=0, result="promoted"):
    """op(a, b) into a new tensor; `result` names its dtype: "promoted" (torch.result_type),
    "float" (true division) or "bool" (comparisons, computed in the promoted dtype)."""
    promoted = _elementwise_result_type(a, b)
    dtype = {"promoted": promoted, "float": _elementwise_float(promoted), "bool": torch.bool}[
        result
    ]
    compute = _elementwise_compute_dtype(promoted if result == "bool" else dtype)
    return _elementwise_launch(op, _elementwise_new((a, b), dtype), (a, b), compute, p0)


def _elementwise_unary_op(op, x, p0=0, p1=0, result="same", inplace=False):
    """op(x) into a new tensor (or into x itself when inplace); `result` names its dtype:
    "same", "float" (math functions of integers give floats) or "bool"."""
    if not kb_is_tensor(x):
        raise TypeError(f"kb_{op} expects a tensor, got {type(x).__name__}")
    dtype = {"same": x.dtype, "float": _elementwise_float(x.dtype), "bool": torch.bool}[result]
    out = x if inplace else torch.empty(x.shape, dtype=dtype, device=x.device)
    compute = _elementwise_compute_dtype(x.dtype if result == "bool" else dtype)
    return _elementwise_launch(op, out, (x,), compute, p0, p1)


def _elementwise_any_tensor(*operands) -> bool:
    return any(kb_is_tensor(operand) for operand in operands)


# Binary arithmetic and comparisons: each computes what Python would on two non-tensors.


def kb_add(a, b, alpha=1):
    if not _elementwise_any_tensor(a, b):
        return a + b if alpha == 1 else a + alpha * b
    return _elementwise_binary_op("add", a, b, p0=alpha)


def kb_sub(a, b, alpha=1):
    if not _elementwise_any_tensor(a, b):
        return a - b if alpha == 1 else a - alpha * b
    return _elementwise_binary_op("sub", a, b, p0=alpha)


def kb_mul(a, b):
    if not _elementwise_any_tensor(a, b):
        return a * b
    return _elementwise_binary_op("mul", a, b)


def kb_div(a, b, rounding_mode=None):
    if rounding_mode not in (None, "trunc", "floor"):
        raise NotImplementedError(f"kb_div: rounding_mode={rounding_mode!r} is not supported")
    if not _elementwise_any_tensor(a, b):
        if rounding_mode is None:
            return a / b
        if rounding_mode == "floor":
            return a // b
        quotient = math.trunc(a / b)
        return quotient if isinstance(a, int) and isinstance(b, int) else float(quotient)
    if rounding_mode is None:
        return _elementwise_binary_op("div", a, b, result="float")
    return _elementwise_binary_op(f"div_{rounding_mode}", a, b)


def kb_floordiv(a, b):
    return kb_div(a, b, rounding_mode="floor")


def kb_remainder(a, b):
    if not _elementwise_any_tensor(a, b):
        return a % b
    return _elementwise_binary_op("remainder", a, b)


# Scalar exponents that torch (and so these kernels) computes by multiplication or roots.
_ELEMENTWISE_POW_AS_UNARY = {
    1: "copy",
    2: "square",
    3: "cube",
    0.5: "sqrt",
    -0.5: "rsqrt",
    -1: "reciprocal",
    -2: "reciprocal_square",
}


def kb_pow(a, b):
    if not _elementwise_any_tensor(a, b):
        return a**b
    dtype = _elementwise_result_type(a, b)
    if kb_is_tensor(a) and not kb_is_tensor(b) and b in _ELEMENTWISE_POW_AS_UNARY:
        out = torch.empty(a.shape, dtype=dtype, device=a.device)
        compute = _elementwise_compute_dtype(dtype)
        return _elementwise_launch(_ELEMENTWISE_POW_AS_UNARY[b], out, (a,), compute)
    if not dtype.is_floating_point:
        raise NotImplementedError(
            f"kb_pow: integer powers other than the exponents {list(_ELEMENTWISE_POW_AS_UNARY)}"
        )
    return _elementwise_binary_op("pow", a, b)


def kb_maximum(a, b):
    if not _elementwise_any_tensor(a, b):
        return max(a, b)
    return _elementwise_binary_op("maximum", a, b)


def kb_minimum(a, b):
    if not _elementwise_any_tensor(a, b):
        return min(a, b)
    return _elementwise_binary_op("minimum", a, b)


def kb_eq(a, b):
    if not _elementwise_any_tensor(a, b):
        return a == b
    return _elementwise_binary_op("eq", a, b, result="bool")


def kb_ne(a, b):
    if not _elementwise_any_tensor(a, b):
        return a != b
    return _elementwise_binary_op("ne", a, b, result="bool")


def kb_lt(a, b):
    if not _elementwise_any_tensor(a, b):
        return a < b
    return _elementwise_binary_op("lt", a, b, result="bool")


def kb_le(a, b):
    if not _elementwise_any_tensor(a, b):
        return a <= b
    return _elementwise_binary_op("le", a, b, result="bool")


def kb_gt(a, b):
    if not _elementwise_any_tensor(a, b):
        return a > b
    return _elementwise_binary_op("gt", a, b, result="bool")


def kb_ge(a, b):
    if not _elementwise_any_tensor(a, b):
        return a >= b
    return _elementwise_binary_op("ge", a, b, result="bool")


def kb_bitwise_and(a, b):
    if not _elementwise_any_tensor(a, b):
        return a & b
    return _elementwise_binary_op("bitwise_and", a, b)


def kb_bitwise_or(a, b):
    if not _elementwise_any_tensor(a, b):
        return a | b
    return _elementwise_binary_op("bitwise_or", a, b)


def kb_logical_and(a, b):
    if not _elementwise_any_tensor(a, b):
        return bool(a) and bool(b)
    return _elementwise_binary_op("logical_and", a, b, result="bool")


def kb_logical_or(a, b):
    if not _elementwise_any_tensor(a, b):
        return bool(a) or bool(b)
    return _elementwise_binary_op("logical_or", a, b, result="bool")


# Unary math: on a non-tensor, what Python's math module computes.


def kb_neg(x):
    return -x if not kb_is_tensor(x) else _elementwise_unary_op("neg", x)


def kb_abs(x):
    return abs(x) if not kb_is_tensor(x) else _elementwise_unary_op("abs", x)


def kb_exp(x):
    return math.exp(x) if not kb_is_tensor(x) else _elementwise_unary_op("exp", x, result="float")


def kb_log(x):
    return math.log(x) if not kb_is_tensor(x) else _elementwise_unary_op("log", x, result="float")


def kb_sqrt(x):
    if not kb_is_tensor(x):
        return math.sqrt(x)
    return _elementwise_unary_op("sqrt", x, result="float")


def kb_rsqrt(x):
    if not kb_is_tensor(x):
        return 1.0 / math.sqrt(x)
    return _elementwise_unary_op("rsqrt", x, result="float")


def kb_sin(x):
    return math.sin(x) if not kb_is_tensor(x) else _elementwise_unary_op("sin", x, result="float")


def kb_cos(x):
    return math.cos(x) if not kb_is_tensor(x) else _elementwise_unary_op("cos", x, result="float")


def kb_tanh(x):
    if not kb_is_tensor(x):
        return math.tanh(x)
    return _elementwise_unary_op("tanh", x, result="float")


def kb_erf(x):
    return math.erf(x) if not kb_is_tensor(x) else _elementwise_unary_op("erf", x, result="float")


def kb_reciprocal(x):
    if not kb_is_tensor(x):
        return 1.0 / x
    return _elementwise_unary_op("reciprocal", x, result="float")


def kb_square(x):
    return x * x if not kb_is_tensor(x) else _elementwise_unary_op("square", x)


def kb_logical_not(x):
    if not kb_is_tensor(x):
        return not x
    return _elementwise_unary_op("logical_not", x, result="bool")


def kb_bitwise_not(x):
    if not kb_is_tensor(x):
        return ~x
    if x.dtype == torch.bool:
        return _elementwise_unary_op("logical_not", x, result="bool")
    return _elementwise_unary_op("bitwise_not", x)


# Activations (tensors only, as in torch); `inplace=True` writes into x, as torch does.


def kb_sigmoid(x):
    return _elementwise_unary_op("sigmoid", x, result="float")


def kb_relu(x, inplace=False):
    return _elementwise_unary_op("relu", x, inplace=inplace)


def kb_hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    return _elementwise_unary_op("clamp", x, min_val, max_val, inplace=inplace)


def kb_relu6(x, inplace=False):
    return kb_hardtanh(x, 0.0, 6.0, inplace)


def kb_clamp(x, min=None, max=None):
    """torch.clamp: scalar bounds in the kernel, tensor bounds through maximum and minimum."""
    if min is None and max is None:
        raise ValueError("kb_clamp: at least one of min and max must be given")
    if kb_is_tensor(min) or kb_is_tensor(max):
        low = x if min is None else kb_maximum(x, min)
        return low if max is None else kb_minimum(low, max)
    if max is None:
        return _elementwise_unary_op("clamp_min", x, min)
    if min is None:
        return _elementwise_unary_op("clamp_max", x, max)
    return _elementwise_unary_op("clamp", x, min, max)


def kb_clamp_min(x, min):
    return kb_clamp(x, min=min)


def kb_clamp_max(x, max):
    return kb_clamp(x, max=max)


def kb_gelu(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise NotImplementedError(f"kb_gelu: approximate={approximate!r} is not supported")
    return _elementwise_unary_op("gelu" if approximate == "none" else "gelu_tanh", x)


def kb_silu(x, inplace=False):
    return _elementwise_unary_op("silu", x, inplace=inplace)


def kb_softplus(x, beta=1.0, threshold=20.0):
    return _elementwise_unary_op("softplus", x, beta, threshold)


def kb_mish(x, inplace=False):
    return _elementwise_unary_op("mish", x, inplace=inplace)


def kb_leaky_relu(x, negative_slope=0.01, inplace=False):
    return _elementwise_unary_op("leaky_relu", x, negative_slope, inplace=inplace)


def kb_elu(x, alpha=1.0, inplace=False):
    return _elementwise_unary_op("elu", x, alpha, inplace=inplace)


def kb_hardswish(x, inplace=False):
    return _elementwise_unary_op("hardswish", x, inplace=inplace)


def kb_hardsigmoid(x, inplace=False):
    return _elementwise_unary_op("hardsigmoid", x, inplace=inplace)


def kb_dropout(x, p=0.5, training=True, inplace=False):
    """Dropout is the identity at inference or p == 0 (x itself, no copy); random masks are not
    reproducible against a reference, so training with p > 0 is refused."""
    if training and p > 0:
        raise NotImplementedError("kb_dropout: dropout in training (p > 0) is not supported")
    return x


# Selection.


def kb_where(cond, a, b):
    dtype = _elementwise_result_type(a, b)
    out = _elementwise_new((cond, a, b), dtype)
    return _elementwise_launch("where", out, (cond, a, b), _elementwise_compute_dtype(dtype))


def kb_masked_fill(x, mask, value):
    """x with `value` (a scalar or 0-d tensor) where mask is true; x's dtype, as torch."""
    out = _elementwise_new((x, mask), x.dtype)
    return _elementwise_launch("where", out, (mask, value, x), _elementwise_compute_dtype(x.dtype))


# Modules: nn's own, their forward through the kernels above.


class KbReLU(nn.ReLU):
    def forward(self, x):
        return kb_relu(x, self.inplace)


class KbHardtanh(nn.Hardtanh):
    def forward(self, x):
        return kb_hardtanh(x, self.min_val, self.max_val, self.inplace)


class KbReLU6(nn.ReLU6):
    forward = KbHardtanh.forward


class KbGELU(nn.GELU):
    def forward(self, x):
        return kb_gelu(x, self.approximate)


class KbSiLU(nn.SiLU):
    def forward(self, x):
        return kb_silu(x, self.inplace)


class KbSigmoid(nn.Sigmoid):
    def forward(self, x):
        return kb_sigmoid(x)


class KbTanh(nn.Tanh):
    def forward(self, x):
        return kb_tanh(x)


class KbDropout(nn.Dropout):
    def forward(self, x):
        return kb_dropout(x, self.p, self.training, self.inplace)


class KbIdentity(nn.Identity):
    def forward(self, x):
        return x


class KbLeakyReLU(nn.LeakyReLU):
    def forward(self, x):
        return kb_leaky_relu(x, self.negative_slope, self.inplace)


class KbELU(nn.ELU):
    def forward(self, x):
        return kb_elu(x, self.alpha, self.inplace)


class KbHardswish(nn.Hardswish):
    def forward(self, x):
        return kb_hardswish(x, self.inplace)


class KbHardsigmoid(nn.Hardsigmoid):
    def forward(self, x):
        return kb_hardsigmoid(x, self.inplace)


class KbSoftplus(nn.Softplus):
    def forward(self, x):
        return kb_softplus(x, self.beta, self.threshold)


class KbMish(nn.Mish):
    def forward(self, x):
        return kb_mish(x, self.inplace)
