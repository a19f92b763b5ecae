"""What the conv family reads from a trace: each convolution's geometry (1D, 2D or 3D, plain or
transposed) with spatial dims padded to three (D, H, W), and a chain of convolutions, each fed by
the one before (a depthwise one then a pointwise one), ending in an elementwise epilogue."""

from __future__ import annotations

from hints.core.binding import bind
from hints.core.calls import is_tensor
from hints.core.epilogue import fused_tail

CONV_OPS = {"conv1d": 1, "conv2d": 2, "conv3d": 3}
TRANSPOSED_OPS = {"conv_transpose1d": 1, "conv_transpose2d": 2, "conv_transpose3d": 3}
CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
TRANSPOSED_ARGS = (
    "input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"
)  # fmt: skip
DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "output_padding": 0, "dilation": 1,
            "groups": 1}  # fmt: skip
FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def dims(value, nd: int, fill: int) -> tuple[int, int, int] | None:
    """An int or an nd-sequence of ints as (D, H, W), the missing leading dims set to `fill`."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,) * nd
    if not isinstance(value, (tuple, list)) or len(value) not in (1, nd):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return (fill,) * (3 - nd) + tuple(value) * (nd // len(value))


def resolve_padding(padding, kernel, dilation, nd: int):
    """Explicit per-dim padding; 'same' only where it is symmetric."""
    if padding == "valid":
        return (0, 0, 0)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return None if any(t % 2 for t in totals) else tuple(t // 2 for t in totals)
    return dims(padding, nd, 0)


def conv_geometry(call) -> dict | None:
    """The geometry of a traced convolution, its channel groups and its output's shape."""
    nd = CONV_OPS.get(call.op) or TRANSPOSED_OPS.get(call.op)
    if nd is None:
        return None
    transposed = call.op in TRANSPOSED_OPS
    names = TRANSPOSED_ARGS if transposed else CONV_ARGS
    values = {**DEFAULTS, **dict(zip(names, call.args, strict=False)), **call.kwargs}
    x, w = values["input"], values["weight"]
    if not (is_tensor(x) and is_tensor(w)) or len(x[1]) != nd + 2 or len(w[1]) != nd + 2:
        return None
    if x[2] not in FLOAT_DTYPES or w[2] != x[2]:
        return None
    n, c, *spatial = x[1]
    spatial = [1] * (3 - nd) + spatial
    kernel = [1] * (3 - nd) + list(w[1][2:])
    stride, dilation = dims(values["stride"], nd, 1), dims(values["dilation"], nd, 1)
    output_padding = dims(values["output_padding"], nd, 0)
    padding = resolve_padding(values["padding"], kernel, dilation or (1, 1, 1), nd)
    if None in (stride, dilation, padding, output_padding):
        return None
    if values["padding"] == "same" and stride != (1, 1, 1):
        return None
    if transposed:
        groups = values["groups"]
        if not isinstance(groups, int) or c != w[1][0] or c % groups:
            return None
        cin_g, cout_g = c // groups, w[1][1]
        out = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, s, p, d, k, op in zip(
                spatial, stride, padding, dilation, kernel, output_padding, strict=True
            )
        ]
    else:
        cin_g = w[1][1]
        if c % cin_g or w[1][0] % (c // cin_g):
            return None
        groups, cout_g = c // cin_g, w[1][0] // (c // cin_g)
        out = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, s, p, d, k in zip(spatial, stride, padding, dilation, kernel, strict=True)
        ]
    return {
        # Constants of the rendered candidate: one value must serve every size of the ladder.
        # A transposed weight does not tell its groups, so they are constants too.
        "geometry": {
            "transposed": transposed,
            "stride": stride,
            "padding": padding,
            "dilation": dilation,
            "output_padding": output_padding,
            "groups": groups if transposed else None,
        },
        "has_bias": is_tensor(values["bias"]),
        "size": [n, c, *spatial, groups * cout_g, cin_g, cout_g, *kernel],
        "output": (n, groups * cout_g, *out[3 - nd :]),
    }


def match_chain(problem) -> dict | None:
    """Facts for convolutions chained from the first traced call, then an elementwise tail
    (hints.core.epilogue) on the last one's result.

    None unless every size traces the same chain: the same geometries and epilogue."""
    chains, sizes = set(), []
    for size in problem.sizes:
        calls = problem.calls.get(size.label, [])
        convs = []
        for call in calls:
            geometry = conv_geometry(call)
            if geometry is None:
                break
            if convs and call.args[0][1] != convs[-1]["output"]:
                return None
            convs.append(geometry)
        if not convs:
            return None
        chains.add(repr([(c["geometry"], c["has_bias"]) for c in convs]))
        sizes += [[size.tier, i, *c["size"]] for i, c in enumerate(convs)]
    # Per-channel operands are indexed by the output channel (`co`, global over groups).
    tail = fused_tail(problem, CONV_OPS.keys() | TRANSPOSED_OPS.keys(), len(convs), 1, "channel",
                      "channel_ok")  # fmt: skip
    if len(chains) != 1 or tail is None:
        return None
    binding = bind(problem)
    if binding is None or len(binding.operands) < len(convs):
        return None
    body = None
    for index, (conv, operands) in enumerate(zip(convs, binding.operands, strict=False)):
        x = operands[0] if index == 0 else body  # later inputs: the previous convolution's
        w = operands[1] if len(operands) > 1 else None
        bias = operands[2] if conv["has_bias"] and len(operands) > 2 else "None"
        if None in (x, w, bias) or (index and operands[0] is not None):
            return None
        extra = "".join(f", {o}" for o in tail["epilogue_operands"])
        body = f"conv({x}, {w}, {bias}, {index}{extra})"
    return {
        **tail,
        "geometry": [conv["geometry"] for conv in convs],
        # [tier, conv index, N, C, D, H, W, C_out, C_in per group, C_out per group, KD, KH, KW]
        "sizes": sizes,
        "init_source": binding.init_source,
        "forward_params": binding.forward_params,
        "forward_body": body,
    }


def render_geometry(geometry: list[dict]) -> str:
    """GEOMETRY's source: one line per convolution."""
    return "[\n" + "".join(f"    {entry!r},\n" for entry in geometry) + "]"
