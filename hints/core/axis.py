"""A reduction's or scan's axis: the contiguous run of dims it runs along, and the operands' shape
seen as (outer, R, inner) around it (R elements along the run, `inner` contiguous ones after)."""

from __future__ import annotations

import math

from hints.core.calls import argument


def reduced_dims(call, index: int, name: str, ndim: int) -> tuple[int, ...] | None:
    """The dims a reduction call reduces, normalized and sorted; None if not a contiguous run."""
    dim = argument(call, index, name)
    dims = range(ndim) if dim is None else (dim if isinstance(dim, (list, tuple)) else [dim])
    dims = sorted(d % ndim for d in dims)
    if not dims or dims != list(range(dims[0], dims[-1] + 1)):
        return None
    return tuple(dims)


def view(shape, dims) -> list[int]:
    """[outer, R, inner] for a reduction over the contiguous run `dims` of `shape`."""
    if not dims:
        return [1, 1, 1]
    return [
        math.prod(shape[: dims[0]]),
        math.prod(shape[dims[0] : dims[-1] + 1]),
        math.prod(shape[dims[-1] + 1 :]),
    ]


# ModelNew's opening for templates that read operands (hints.core.operands) along an axis: the
# operands' shape as (outer, R, inner) around the dims $d0:$d1 that the kernel runs along.
MODEL_OPENING = """$python_helper


class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        shape = $shape_expr
$prologue
        R = shape[$d0:$d1].numel()
        inner = shape[$d1:].numel()
        outer = shape.numel() // max(1, R * inner)
"""
