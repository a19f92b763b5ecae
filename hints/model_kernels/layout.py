"""Data movement that is not a view: concatenation, stacking, assignment into a view, rolls,
padding, repeats and flips are strided copies through the elementwise group's kernel (each a
copy from a view of the source into a view of the result); triangles and rows picked by an index
tensor have kernels of their own; einops-style rearrange is views, reshapes and a permute."""

import math

import torch
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_INTERPRETER_TILE,
    kb_cdiv,
    kb_interpreted,
    kb_is_tensor,
    kb_next_power_of_2,
)
from hints.model_kernels.elementwise import _elementwise_compute_dtype, _elementwise_launch

_LAYOUT_TAKE_BLOCK = 1024  # elements of the result per program of the row gather
# A tile of one matrix per program for tril/triu: 32 rows by 64 columns.
_LAYOUT_TRIANGLE_ROWS = 32
_LAYOUT_TRIANGLE_COLS = 64


def kb_copy(dst, src, non_blocking=False):
    """Tensor.copy_: src (a tensor or a scalar) broadcast to dst's shape and cast to its dtype,
    written into dst (any view). Returns dst. src must not overlap dst in memory."""
    dtype = src.dtype if kb_is_tensor(src) else dst.dtype
    return _elementwise_launch("copy", dst, (src,), _elementwise_compute_dtype(dtype))


def _layout_check_cat(tensors, dim):
    """torch.cat's rule: same rank, same sizes but along `dim` (a copy would broadcast)."""
    first = tensors[0]
    for t in tensors[1:]:
        if t.dim() != first.dim() or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if d != dim
        ):
            raise ValueError(
                f"kb_cat: sizes {tuple(t.shape)} and {tuple(first.shape)} differ off dim {dim}"
            )


def _layout_continues(a, b, dim) -> bool:
    """Whether b starts in memory where a ends along `dim`: one storage, one dtype and layout."""
    return (
        a.dtype == b.dtype
        and a.stride() == b.stride()
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and b.storage_offset() == a.storage_offset() + a.shape[dim] * a.stride(dim)
    )


def _layout_runs(tensors, dim) -> list:
    """The inputs, each run of them that continue one another along `dim` as one view of their
    storage (the steps of one tensor stacked back, say): a copy a run."""
    runs = [tensors[0]]
    for t in tensors[1:]:
        last = runs[-1]
        if not _layout_continues(last, t, dim):
            runs.append(t)
            continue
        shape = list(last.shape)
        shape[dim] += t.shape[dim]
        runs[-1] = last.as_strided(shape, last.stride(), last.storage_offset())
    return runs


def kb_cat(tensors, dim=0):
    """torch.cat (also torch.concat and torch.concatenate): one copy per input (per run of
    inputs adjacent in memory) into its slice of the result, in the dtype the inputs promote
    to."""
    tensors = list(tensors)
    dim = dim % tensors[0].dim()
    _layout_check_cat(tensors, dim)
    dtype = tensors[0].dtype
    for t in tensors[1:]:  # torch.promote_types would reach an aten operator; this does not
        dtype = torch.result_type(torch.empty(1, dtype=dtype, device="meta"), t)
    shape = list(tensors[0].shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    out = torch.empty(shape, dtype=dtype, device=tensors[0].device)
    offset = 0
    for run in _layout_runs(tensors, dim):
        kb_copy(out.narrow(dim, offset, run.shape[dim]), run)
        offset += run.shape[dim]
    return out


kb_concat = kb_cat
kb_concatenate = kb_cat


def kb_stack(tensors, dim=0):
    tensors = list(tensors)
    dim = dim % (tensors[0].dim() + 1)
    return kb_cat([t.unsqueeze(dim) for t in tensors], dim)


@triton.jit
def _layout_take_rows_kernel(x_ptr, index_ptr, out_ptr, total, rows, inner, stride_row,
                             stride_inner, BLOCK: tl.constexpr):  # fmt: skip
    """out[i, j] = x[index[i], j] over out's flat elements (a negative index counts from the
    end; one out of range reads nothing and leaves 0, where torch raises)."""
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = e < total
    i, j = e // inner, e % inner
    row = tl.load(index_ptr + i, mask=ok, other=0).to(tl.int64)
    row = tl.where(row < 0, row + rows, row)
    ok = ok & (row >= 0) & (row < rows)
    value = tl.load(x_ptr + row * stride_row + j * stride_inner, mask=ok, other=0)
    tl.store(out_ptr + e, value, mask=e < total)


def _layout_take_rows(x, index):
    """x[index] for an integer tensor `index` of any shape: the rows of x it names."""
    rows = x.shape[0]
    source = x.reshape(rows, -1)
    out = torch.empty((*index.shape, *x.shape[1:]), dtype=x.dtype, device=x.device)
    total = out.numel()
    if total == 0:
        return out
    block = _LAYOUT_TAKE_BLOCK
    if kb_interpreted(x):
        block = min(kb_next_power_of_2(total), KB_INTERPRETER_TILE)
    _layout_take_rows_kernel[(kb_cdiv(total, block),)](
        source, index.reshape(-1), out, total, rows, source.shape[1], *source.stride(),
        BLOCK=block,
    )  # fmt: skip
    return out


def kb_getitem(x, index):
    """`x[index]`: rows of a tensor picked by an integer tensor (`table[idx]`, idx of any shape)
    gathered by a kernel; anything else as Python indexes it (a view for ints, slices, None and
    Ellipsis; the gate names the torch operator that other tensor indices reach)."""
    if kb_is_tensor(x) and kb_is_tensor(index) and x.dim() > 0:
        if not index.dtype.is_floating_point and index.dtype != torch.bool:
            return _layout_take_rows(x, index)
    return x[index]


def _layout_is_basic_index(index) -> bool:
    """Whether x[index] is a view: ints, slices, None and Ellipsis only."""
    items = index if isinstance(index, tuple) else (index,)
    return all(item is None or item is Ellipsis or isinstance(item, (int, slice)) for item in items)


def kb_setitem(x, index, value):
    """`x[index] = value`: value (a tensor or scalar) broadcast into the view x[index]; a boolean
    mask over x's leading dims takes a scalar (or one-element) value. Non-tensors: Python's."""
    if not kb_is_tensor(x):
        x[index] = value
    elif kb_is_tensor(index) and index.dtype == torch.bool:
        if kb_is_tensor(value) and value.numel() != 1:
            raise NotImplementedError("kb_setitem: a mask takes a scalar value, not a tensor")
        value = value.reshape(()) if kb_is_tensor(value) else value
        mask = index.reshape(tuple(index.shape) + (1,) * (x.dim() - index.dim()))
        _elementwise_launch("where", x, (mask, value, x), _elementwise_compute_dtype(x.dtype))
    elif _layout_is_basic_index(index):
        kb_copy(x[index], value)
    else:
        raise NotImplementedError(
            "kb_setitem: only int, slice, None and Ellipsis indices and boolean masks are supported"
        )


@triton.jit
def _layout_triangle_kernel(
    x_ptr, out_ptr, rows, cols, stride_batch, stride_row, stride_col, diagonal,
    LOWER: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """One tile of one matrix: x where col - row <= diagonal (LOWER) or >= diagonal, else 0; the
    program id walks matrices outermost, then row tiles, then column tiles."""
    pid = tl.program_id(0)
    col_tiles = tl.cdiv(cols, BLOCK_C)
    tiles = tl.cdiv(rows, BLOCK_R) * col_tiles
    batch = (pid // tiles).to(tl.int64)
    tile = pid % tiles
    r = ((tile // col_tiles) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)[:, None]
    c = ((tile % col_tiles) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)[None, :]
    inside = (r < rows) & (c < cols)
    if LOWER:
        keep = c - r <= diagonal
    else:
        keep = c - r >= diagonal
    offsets = batch * stride_batch + r * stride_row + c * stride_col
    values = tl.load(x_ptr + offsets, mask=inside & keep, other=0)
    tl.store(out_ptr + batch * rows * cols + r * cols + c, values, mask=inside)


def _layout_triangle(x, diagonal, lower):
    if x.dim() < 2:
        raise ValueError(f"kb_tril/kb_triu need a matrix or a batch of them, got {x.dim()} dims")
    rows, cols = x.shape[-2:]
    matrices = x.reshape(-1, rows, cols)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    tiles = kb_cdiv(rows, _LAYOUT_TRIANGLE_ROWS) * kb_cdiv(cols, _LAYOUT_TRIANGLE_COLS)
    _layout_triangle_kernel[(matrices.shape[0] * tiles,)](
        matrices, out, rows, cols, *matrices.stride(), diagonal,
        LOWER=lower, BLOCK_R=_LAYOUT_TRIANGLE_ROWS, BLOCK_C=_LAYOUT_TRIANGLE_COLS,
    )  # fmt: skip
    return out


def kb_tril(x, diagonal=0):
    return _layout_triangle(x, diagonal, lower=True)


def kb_triu(x, diagonal=0):
    return _layout_triangle(x, diagonal, lower=False)


def _layout_int_tuple(values) -> tuple:
    """(2, 3), ((2, 3),) and ([2, 3],) -> (2, 3): torch's varargs-or-sequence size arguments."""
    if len(values) == 1 and not isinstance(values[0], int):
        return tuple(values[0])
    return tuple(values)


def kb_roll(x, shifts, dims=None):
    """torch.roll: per rolled dim, the result's two slices take the source's two slices swapped;
    2**k copies for k dims. Without dims, the flattened tensor rolls."""
    if dims is None:
        return kb_roll(x.reshape(-1), shifts, 0).view(x.shape)
    shifts, dims = _layout_int_tuple((shifts,)), _layout_int_tuple((dims,))
    total = {}
    for shift, dim in zip(shifts, dims, strict=True):
        total[dim % x.dim()] = total.get(dim % x.dim(), 0) + shift
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    pieces = [(out, x)]
    for dim, shift in total.items():
        size = x.shape[dim]
        shift = shift % size if size else 0
        if shift:
            pieces = [
                pair
                for target, source in pieces
                for pair in (
                    (target.narrow(dim, shift, size - shift), source.narrow(dim, 0, size - shift)),
                    (target.narrow(dim, 0, shift), source.narrow(dim, size - shift, shift)),
                )
            ]
    for target, source in pieces:
        kb_copy(target, source)
    return out


def kb_pad(x, pad, mode="constant", value=None):
    """F.pad in constant mode: the result filled with value, x copied into its interior; negative
    pads crop."""
    if mode != "constant":
        raise NotImplementedError(f"kb_pad: mode={mode!r} is not supported (constant only)")
    if len(pad) % 2 or len(pad) // 2 > x.dim():
        raise ValueError(f"kb_pad: {len(pad)} pads for a tensor of {x.dim()} dims")
    shape = list(x.shape)
    for k in range(len(pad) // 2):
        shape[-1 - k] += pad[2 * k] + pad[2 * k + 1]
    out = torch.full(shape, 0 if value is None else value, dtype=x.dtype, device=x.device)
    target, source = out, x
    for k in range(len(pad) // 2):
        dim, before, after = x.dim() - 1 - k, pad[2 * k], pad[2 * k + 1]
        kept = x.shape[dim] + min(before, 0) + min(after, 0)
        if kept <= 0:
            return out
        target = target.narrow(dim, max(before, 0), kept)
        source = source.narrow(dim, max(-before, 0), kept)
    kb_copy(target, source)
    return out


def kb_repeat(x, *sizes):
    """Tensor.repeat: the result viewed as (r0, s0, r1, s1, ...) takes x viewed as (1, s0, 1, s1,
    ...), broadcast: one copy."""
    sizes = _layout_int_tuple(sizes)
    if len(sizes) < x.dim():
        raise ValueError(f"kb_repeat: {len(sizes)} sizes for a tensor of {x.dim()} dims")
    source_shape = (1,) * (len(sizes) - x.dim()) + tuple(x.shape)
    out = torch.empty(
        [r * s for r, s in zip(sizes, source_shape, strict=True)], dtype=x.dtype, device=x.device
    )
    interleaved = [n for r, s in zip(sizes, source_shape, strict=True) for n in (r, s)]
    kb_copy(out.view(interleaved), x.reshape([n for s in source_shape for n in (1, s)]))
    return out


def kb_flip(x, dims, *more):
    """torch.flip and Tensor.flip(*dims): one copy that reads x from its last element along the
    flipped dims, through negated strides."""
    flipped = {d % x.dim() for d in _layout_int_tuple((dims, *more))}
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    strides, start = list(x.stride()), x.storage_offset()
    for d in flipped:
        start += (x.shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    first = x.as_strided((1,) * x.dim(), x.stride(), start)  # the element read first
    source = (first, tuple(strides))
    return _elementwise_launch("copy", out, (source,), _elementwise_compute_dtype(x.dtype))


def _layout_parse_side(text):
    """One side of an einops pattern, one entry per dim: a list of axis names (empty for a unit
    axis "1" or "()"), or "..." for the dims an ellipsis stands for."""
    dims, group = [], None
    for token in text.replace("(", " ( ").replace(")", " ) ").split():
        if not (token in ("(", ")", "...") or token.isidentifier() or token.isdigit()):
            raise ValueError(f"kb_rearrange: cannot parse {token!r} in {text!r}")
        if token == "(" and group is None:
            group = []
        elif token == ")" and group is not None:
            dims.append(group)
            group = None
        elif token.isdigit():
            if token != "1":
                raise NotImplementedError(f"kb_rearrange: axis length {token} in a pattern")
            if group is None:
                dims.append([])
        elif token in ("(", ")"):
            raise ValueError(f"kb_rearrange: unbalanced parentheses in {text!r}")
        elif group is None:
            dims.append("..." if token == "..." else [token])
        else:
            group.append(token)
    if group is not None:
        raise ValueError(f"kb_rearrange: unbalanced parentheses in {text!r}")
    return dims


def _layout_expand_ellipsis(dims, names):
    """Replace the ellipsis by its axes: one dim per axis at the top level, all in the group
    that holds it inside parentheses."""
    expanded = []
    for dim in dims:
        if dim == "...":
            expanded += [[name] for name in names]
        else:
            expanded.append([a for axis in dim for a in (names if axis == "..." else [axis])])
    return expanded


def _layout_axis_sizes(lhs, shape, axes_lengths):
    """Every input axis's length: given, or the one unknown of its dim's group."""
    sizes = dict(axes_lengths)
    for group, length in zip(lhs, shape, strict=True):
        unknown = [axis for axis in group if axis not in sizes]
        known = math.prod(sizes[axis] for axis in group if axis in sizes)
        if len(unknown) > 1:
            raise ValueError(f"kb_rearrange: cannot infer the lengths of {unknown}")
        if unknown and known and length % known == 0:
            sizes[unknown[0]] = length // known
        elif unknown or known != length:
            raise ValueError(f"kb_rearrange: a dim of length {length} cannot be split as {group}")
    return sizes


def kb_rearrange(x, pattern, **axes_lengths):
    """einops.rearrange for one tensor: axes named on the left (groups in parentheses split a
    dim, "..." stands for the dims not named, "1" for a unit dim) move to their places on the
    right; a reshape, a permute and a reshape (views where torch can)."""
    left, arrow, right = pattern.partition("->")
    if not arrow:
        raise ValueError(f"kb_rearrange: {pattern!r} has no '->'")
    lhs, rhs = _layout_parse_side(left), _layout_parse_side(right)
    if lhs.count("...") > 1 or any(dim != "..." and "..." in dim for dim in lhs):
        raise NotImplementedError("kb_rearrange: one ellipsis, outside parentheses, on the left")
    ellipsis_dims = x.dim() - (len(lhs) - lhs.count("..."))
    names = [f"...{i}" for i in range(ellipsis_dims)]
    lhs, rhs = _layout_expand_ellipsis(lhs, names), _layout_expand_ellipsis(rhs, names)
    if len(lhs) != x.dim():
        raise ValueError(f"kb_rearrange: {left.strip()!r} does not match {x.dim()} dims")
    lhs_axes = [axis for group in lhs for axis in group]
    rhs_axes = [axis for group in rhs for axis in group]
    if sorted(lhs_axes) != sorted(rhs_axes) or len(set(lhs_axes)) != len(lhs_axes):
        raise ValueError(f"kb_rearrange: {pattern!r} must name each axis once on each side")
    sizes = _layout_axis_sizes(lhs, x.shape, axes_lengths)
    split = x.reshape([sizes[axis] for axis in lhs_axes])
    moved = split.permute([lhs_axes.index(axis) for axis in rhs_axes])
    return moved.reshape([math.prod(sizes[axis] for axis in group) for group in rhs])
