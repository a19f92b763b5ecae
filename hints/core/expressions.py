"""Triton expressions built as text: the elementwise operators (activations, arithmetic, clamps)
applied to an expression, for fused kernels and epilogues. `step` applies one traced call;
`epilogue_expression` turns a traced chain of one tensor into one expression."""

from __future__ import annotations

import math

from hints.core.calls import is_tensor

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
SQRT_HALF = 0.7071067811865476  # 1/sqrt(2), for the exact (erf) GELU
SQRT_2_OVER_PI = 0.7978845608028654  # sqrt(2/pi), for the tanh-approximated GELU


def scalar(value) -> str | None:
    """A Python number as a Triton float literal (parenthesized when negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    text = repr(float(value))
    return f"({text})" if value < 0 else text


class Expr:
    """A Triton expression; `atom` when it needs no parentheses as an operand."""

    def __init__(self, text: str, atom: bool = False):
        self.text, self.atom = text, atom

    def __str__(self) -> str:
        return self.text if self.atom else f"({self.text})"


def call(name: str, *operands) -> Expr:
    return Expr(
        f"{name}({', '.join(str(o) if isinstance(o, Expr) else o for o in operands)})", atom=True
    )


def binary(left, op: str, right) -> Expr:
    return Expr(f"{left} {op} {right}")


# tanh(x) / x as a series in x*x: its first nine Taylor coefficients, to fp32 rounding for |x|
# below TANH_SERIES_BELOW, where 1 - exp(-2|x|) cancels.
TANH_SERIES = (1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075,
               -929569 / 638512875, 6404582 / 10854718875)  # fmt: skip
TANH_SERIES_BELOW = 0.55


def tanh(x: Expr) -> Expr:
    """tanh without libdevice (the interpreter has none), about as accurate as PyTorch's: the
    series near zero, where 2*sigmoid(2x) - 1 loses bits (twice PyTorch's error over N(0, 1)
    inputs), and (1 - e) / (1 + e) with e = exp(-2|x|) beyond."""
    z = binary(x, "*", x)
    series = scalar(TANH_SERIES[-1])
    for coefficient in reversed(TANH_SERIES[:-1]):
        series = binary(binary(series, "*", z), "+", scalar(coefficient))
    e = call("tl.exp", binary("-2.0", "*", call("tl.abs", x)))
    far = binary(binary("1.0", "-", e), "/", binary("1.0", "+", e))
    sign = call("tl.where", binary(x, "<", "0.0"), "-1.0", "1.0")
    near = binary(call("tl.abs", x), "<", scalar(TANH_SERIES_BELOW))
    return call("tl.where", near, binary(x, "*", series), binary(sign, "*", far))


def clamp(x: Expr, low, high) -> Expr | None:
    if low is not None:
        if (low := scalar(low)) is None:
            return None
        x = call("tl.maximum", x, low)
    if high is not None:
        if (high := scalar(high)) is None:
            return None
        x = call("tl.minimum", x, high)
    return x


def power(x: Expr, exponent) -> Expr | None:
    """x ** exponent for a scalar exponent, without libdevice.pow (absent in the interpreter)."""
    if scalar(exponent) is None:
        return None
    if exponent == 0.5:
        return call("tl.sqrt", x)
    if exponent == -0.5:
        return call("tl.rsqrt", x)
    if float(exponent).is_integer() and 1 <= abs(exponent) <= 4:
        product = Expr(" * ".join([str(x)] * int(abs(exponent))), atom=abs(exponent) == 1)
        return product if exponent > 0 else binary("1.0", "/", product)
    if float(exponent).is_integer():
        return None  # a negative base with a large integer power needs its sign kept
    # Non-integer power: NaN for negative bases in PyTorch too.
    return call("tl.exp2", binary(scalar(exponent), "*", call("tl.log2", x)))


def scalar_power(base, x: Expr) -> Expr | None:
    """base ** x for a positive scalar base."""
    if scalar(base) is None or base <= 0:
        return None
    return call("tl.exp2", binary(x, "*", scalar(math.log2(base))))


UNARY = {
    "relu": lambda x: call("tl.maximum", x, "0.0"),
    "relu6": lambda x: clamp(x, 0.0, 6.0),
    "sigmoid": lambda x: call("tl.sigmoid", x),
    "tanh": tanh,
    "silu": lambda x: binary(x, "*", call("tl.sigmoid", x)),
    "exp": lambda x: call("tl.exp", x),
    "exp2": lambda x: call("tl.exp2", x),
    "log": lambda x: call("tl.log", x),
    "log2": lambda x: call("tl.log2", x),
    "sqrt": lambda x: call("tl.sqrt", x),
    "rsqrt": lambda x: call("tl.rsqrt", x),
    "abs": lambda x: call("tl.abs", x),
    "sin": lambda x: call("tl.sin", x),
    "cos": lambda x: call("tl.cos", x),
    "erf": lambda x: call("tl.erf", x),
    "floor": lambda x: call("tl.floor", x),
    "ceil": lambda x: call("tl.ceil", x),
    "neg": lambda x: Expr(f"-{x}"),
    "square": lambda x: binary(x, "*", x),
    "reciprocal": lambda x: binary("1.0", "/", x),
    "hardsigmoid": lambda x: clamp(binary(binary(x, "/", "6.0"), "+", "0.5"), 0.0, 1.0),
    "hardswish": lambda x: binary(x, "*", clamp(binary(binary(x, "/", "6.0"), "+", "0.5"), 0, 1)),
    "softsign": lambda x: binary(x, "/", binary("1.0", "+", call("tl.abs", x))),
    "mish": lambda x: binary(x, "*", tanh(softplus(x, 1.0, 20.0))),
}


def softplus(x: Expr, beta, threshold) -> Expr | None:
    if scalar(beta) is None or scalar(threshold) is None:
        return None
    scaled = binary(x, "*", scalar(beta))
    smooth = binary(call("tl.log", binary("1.0", "+", call("tl.exp", scaled))), "/", scalar(beta))
    return call("tl.where", binary(scaled, ">", scalar(threshold)), x, smooth)


def elu(x: Expr, alpha) -> Expr | None:
    if scalar(alpha) is None:
        return None
    negative = binary(scalar(alpha), "*", binary(call("tl.exp", x), "-", "1.0"))
    return call("tl.where", binary(x, ">", "0.0"), x, negative)


def gelu(x: Expr, approximate) -> Expr | None:
    if approximate == "tanh":
        inner = binary(
            scalar(SQRT_2_OVER_PI),
            "*",
            binary(x, "+", binary("0.044715", "*", binary(binary(x, "*", x), "*", x))),
        )
        return binary(binary("0.5", "*", x), "*", binary("1.0", "+", tanh(inner)))
    if approximate not in (None, "none"):
        return None
    return binary(
        binary("0.5", "*", x),
        "*",
        binary("1.0", "+", call("tl.erf", binary(x, "*", scalar(SQRT_HALF)))),
    )


def arithmetic(op: str, x: Expr, other, tensor_first: bool, alpha) -> Expr | None:
    """add/sub/mul/div/pow of the chain value and a scalar, in either operand order."""
    if scalar(other) is None or scalar(alpha) is None:
        return None
    if op in ("add", "sub") and alpha != 1:
        if not tensor_first:
            return None  # alpha scales the second operand: the tensor here
        other = other * alpha
    if op == "pow":
        return power(x, other) if tensor_first else scalar_power(other, x)
    symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[op]
    left, right = (x, scalar(other)) if tensor_first else (scalar(other), x)
    return binary(left, symbol, right)


def step_argument(call_args: tuple, kwargs: dict, index: int, name: str, default):
    """A call's argument by position among its operands after the tensor, or by keyword."""
    if name in kwargs:
        return kwargs[name]
    return call_args[index] if index < len(call_args) else default


def step(op: str, x: Expr, args: tuple, kwargs: dict, tensor_first: bool) -> Expr | None:
    """Apply one traced call to the chain value; `args` are the call's non-tensor operands."""
    kwargs = {k: v for k, v in kwargs.items() if k != "inplace"}
    if op in UNARY and not args and not kwargs:
        return UNARY[op](x)
    if op in ("add", "sub", "mul", "div", "pow") and len(args) == 1:
        if kwargs.get("rounding_mode") is not None:
            return None
        return arithmetic(op, x, args[0], tensor_first, kwargs.get("alpha", 1))
    if op in ("rsub", "rdiv") and len(args) == 1:  # torch.rsub(x, s) = s - x
        return arithmetic(op[1:], x, args[0], tensor_first=False, alpha=kwargs.get("alpha", 1))
    if op == "clamp":
        low, high = (
            step_argument(args, kwargs, 0, "min", None),
            step_argument(args, kwargs, 1, "max", None),
        )
        return clamp(x, low, high)
    if op in ("clamp_min", "clamp_max"):
        value = step_argument(args, kwargs, 0, op[-3:], None)
        return clamp(x, value, None) if op == "clamp_min" else clamp(x, None, value)
    if op == "hardtanh":
        return clamp(
            x,
            step_argument(args, kwargs, 0, "min_val", -1.0),
            step_argument(args, kwargs, 1, "max_val", 1.0),
        )
    if op == "leaky_relu":
        slope = scalar(step_argument(args, kwargs, 0, "negative_slope", 0.01))
        return (
            None
            if slope is None
            else call("tl.where", binary(x, ">=", "0.0"), x, binary(x, "*", slope))
        )
    if op == "threshold":
        threshold, value = (
            step_argument(args, kwargs, 0, "threshold", None),
            step_argument(args, kwargs, 1, "value", None),
        )
        if scalar(threshold) is None or scalar(value) is None:
            return None
        return call("tl.where", binary(x, ">", scalar(threshold)), x, scalar(value))
    if op in ("elu", "celu"):
        return elu(x, step_argument(args, kwargs, 0, "alpha", 1.0))
    if op == "selu":
        return binary("1.0507009873554805", "*", elu(x, 1.6732632423543772))
    if op == "softplus":
        return softplus(
            x,
            step_argument(args, kwargs, 0, "beta", 1.0),
            step_argument(args, kwargs, 1, "threshold", 20.0),
        )
    if op == "gelu":
        return gelu(x, step_argument(args, kwargs, 0, "approximate", "none"))
    return None


def epilogue_expression(calls, var: str = "acc") -> str | None:
    """A Triton expression in `var` for a chain of traced elementwise calls, each applied to the
    previous result (e.g. relu then / 2.0 -> "tl.maximum(acc, 0.0) / 2.0"); None when a call is
    not a floating-point elementwise op of one tensor and scalars."""
    expr = Expr(var, atom=True)
    for traced in calls:
        tensors = [i for i, a in enumerate(traced.args) if is_tensor(a)]
        if len(tensors) != 1 or any(is_tensor(v) for v in traced.kwargs.values()):
            return None
        if traced.args[tensors[0]][2] not in FLOAT_DTYPES:
            return None
        others = tuple(a for i, a in enumerate(traced.args) if i != tensors[0])
        expr = step(traced.op, expr, others, dict(traced.kwargs), tensor_first=tensors[0] == 0)
        if expr is None:
            return None
    return expr.text if calls else None
