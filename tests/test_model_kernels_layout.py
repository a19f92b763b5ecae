"""The layout group of the whole-model kernel library (hints/model_kernels/layout.py) against
torch and einops: concatenation, stacking, assignment into views, triangles, rolls, padding,
repeats, flips and rearrange, over non-contiguous inputs in the forms KernelBench models use;
each launcher reaching only layout operators."""

import einops
import pytest
import torch
import torch.nn.functional as F

from hints.model_kernels import layout as lo
from tests.model_kernels_checks import assert_matches, layout_only


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def transposed(*shape):
    """A non-contiguous tensor of `shape`: the transpose of a contiguous one."""
    return torch.randn(*reversed(shape)).permute(*reversed(range(len(shape))))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_of_noncontiguous_inputs(dim):
    a, b = transposed(2, 3, 4), torch.randn(4, 6, 8)[::2, ::2, ::2]
    c = torch.randn(2, 3, 4)
    shape = list(a.shape)
    shape[dim] = 1
    d = torch.randn(shape)
    assert_matches(layout_only(lo.kb_cat, [a, b, c, d], dim), torch.cat([a, b, c, d], dim))


def test_cat_promotes_dtypes_and_has_torchs_other_names():
    a, b = torch.randn(2, 3), torch.randint(0, 5, (2, 2))
    assert_matches(layout_only(lo.kb_cat, (a, b), dim=1), torch.cat((a, b), dim=1))
    assert lo.kb_concat is lo.kb_cat and lo.kb_concatenate is lo.kb_cat


def test_cat_in_mamba2s_form():
    states = torch.randn(2, 3, 4, 5)
    initial = torch.zeros_like(states[:, :1])
    assert_matches(
        layout_only(lo.kb_cat, [initial, states], dim=1), torch.cat([initial, states], dim=1)
    )


def test_cat_refuses_sizes_that_differ_off_its_dim():
    with pytest.raises(ValueError, match="differ"):
        lo.kb_cat([torch.randn(2, 1), torch.randn(3, 4)], 0)


@pytest.mark.parametrize("dim", [0, 2, -1])
def test_stack(dim):
    tensors = [transposed(3, 4), torch.randn(3, 4), torch.randn(3, 8)[:, ::2]]
    assert_matches(layout_only(lo.kb_stack, tensors, dim), torch.stack(tensors, dim))


@pytest.mark.parametrize(
    ("parts", "copies"),
    [
        (lambda x: list(x.unbind(0)), 1),  # a tensor's own steps stacked back
        (lambda x: [x[0], x[1], x[3]], 2),  # a gap: two runs
        (lambda x: [x[1], x[0]], 2),  # out of order
        (lambda x: [x[0], x[1].clone()], 2),  # another storage
        (lambda x: list(x.transpose(0, 1).unbind(0)), 3),  # steps whose layout does not continue
    ],
    ids=["own-steps", "gap", "out-of-order", "another-storage", "not-continuing"],
)
def test_stack_copies_once_per_run_of_inputs_adjacent_in_memory(parts, copies, monkeypatch):
    made = []
    copy = lo.kb_copy
    monkeypatch.setattr(lo, "kb_copy", lambda dst, src: made.append(src) or copy(dst, src))
    tensors = parts(torch.randn(4, 3, 5))
    assert_matches(layout_only(lo.kb_stack, tensors, 0), torch.stack(tensors, 0))
    assert len(made) == copies


def test_cat_of_a_tensors_consecutive_slices_copies_once(monkeypatch):
    made = []
    copy = lo.kb_copy
    monkeypatch.setattr(lo, "kb_copy", lambda dst, src: made.append(src) or copy(dst, src))
    x = torch.randn(3, 8, 2)
    parts = [x[:, :2], x[:, 2:5], x[:, 5:]]
    assert_matches(layout_only(lo.kb_cat, parts, 1), torch.cat(parts, 1))
    assert len(made) == 1


# x[index] = value: (index, value) pairs over a (2, 6, 6, 3) tensor.
SETITEMS = {
    "swin_mask": ((slice(None), slice(-4, -2), slice(-2, None), slice(None)), 3.0),
    "strided_slice": ((slice(None), slice(0, None, 2)), 1.5),
    "int_and_ellipsis": ((1, Ellipsis, 0), torch.arange(6.0)),
    "broadcast_tensor": ((slice(None), 2), torch.randn(6, 1).t().t()),
    "none": ((0, None), -1.0),
    "int": (0, 7),
}


@pytest.mark.parametrize("case", SETITEMS)
def test_setitem_writes_into_the_view(case):
    index, value = SETITEMS[case]
    x = torch.randn(2, 6, 6, 3)
    expected = x.clone()
    expected[index] = value
    assert layout_only(lo.kb_setitem, x, index, value) is None
    assert_matches(x, expected)


def test_setitem_through_a_boolean_mask():
    x = torch.randn(2, 4, 3)
    expected = x.clone()
    expected[expected > 0] = 0.0
    layout_only(lo.kb_setitem, x, x > 0, 0.0)
    assert_matches(x, expected)
    rows = torch.tensor([[True, False, True, False], [False, False, True, True]])
    expected[rows] = -2.0
    layout_only(lo.kb_setitem, x, rows, torch.tensor(-2.0))
    assert_matches(x, expected)


def test_setitem_on_python_containers_and_unsupported_indices():
    items = [1, 2, 3]
    lo.kb_setitem(items, 1, 9)
    assert items == [1, 9, 3]
    x = torch.randn(4, 3)
    with pytest.raises(NotImplementedError, match="indices"):
        lo.kb_setitem(x, torch.tensor([0, 2]), 1.0)
    with pytest.raises(NotImplementedError, match="scalar value"):
        lo.kb_setitem(x, x > 0, torch.randn(4, 3))


@pytest.mark.parametrize(
    "index",
    [[5, 0, 5, 2], [[0, -1], [3, 1]], []],
    ids=["repeats", "negative-2d", "empty"],
)
def test_getitem_gathers_rows_by_an_index_tensor(index):
    """A Swin transformer's `table[relative_position_index.view(-1)]`: rows picked, any shape."""
    table = torch.randn(6, 3, 2).transpose(1, 2)  # strided rows
    index = torch.tensor(index, dtype=torch.int64)
    assert_matches(layout_only(lo.kb_getitem, table, index), table[index])


def test_getitem_leaves_views_and_python_containers_to_python():
    x = torch.randn(4, 3)
    view = layout_only(lo.kb_getitem, x, (slice(None), 1))
    assert view.data_ptr() == x[:, 1].data_ptr()
    assert lo.kb_getitem((7, 8), 1) == 8


def test_copy_casts_and_broadcasts_into_a_view():
    dst = torch.zeros(4, 3, dtype=torch.int32).t()
    src = torch.tensor([1.7, -2.7, 3.2, -0.5])
    assert layout_only(lo.kb_copy, dst, src) is dst
    assert_matches(dst, torch.zeros(3, 4, dtype=torch.int32).copy_(src))
    flags = torch.zeros(2, 4, dtype=torch.bool)
    assert_matches(layout_only(lo.kb_copy, flags, src), flags.clone().copy_(src))


@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_tril_and_triu(diagonal):
    x = transposed(2, 5, 7)
    assert_matches(layout_only(lo.kb_tril, x, diagonal), torch.tril(x, diagonal))
    assert_matches(layout_only(lo.kb_triu, x, diagonal=diagonal), torch.triu(x, diagonal))


def test_tril_of_a_boolean_mask_as_mamba2_builds_it():
    ones = torch.ones(6, 6, dtype=torch.bool)
    assert_matches(layout_only(lo.kb_tril, ones, diagonal=0), torch.tril(ones, diagonal=0))
    with pytest.raises(ValueError, match="matrix"):
        lo.kb_tril(torch.ones(3))


ROLLS = {
    "swin": ((-1, -1), (1, 2)),
    "swin_back": ((1, 2), (1, 2)),
    "one_dim": (3, 0),
    "past_the_size": (7, -1),
    "same_dim_twice": ((1, 1), (2, 2)),
    "flattened": (5, None),
}


@pytest.mark.parametrize("case", ROLLS)
def test_roll(case):
    shifts, dims = ROLLS[case]
    x = transposed(2, 4, 3, 5)
    assert_matches(layout_only(lo.kb_roll, x, shifts, dims), torch.roll(x, shifts, dims))


PADS = {
    "mamba2": ((1, 0), None),
    "two_dims": ((1, 2, 0, 3), 2.5),
    "crop": ((-1, 2, 1, -2), -1.0),
}


@pytest.mark.parametrize("case", PADS)
def test_pad_constant(case):
    pad, value = PADS[case]
    x = transposed(2, 4, 5)
    assert_matches(layout_only(lo.kb_pad, x, pad, value=value), F.pad(x, pad, value=value))


def test_pad_refuses_other_modes():
    with pytest.raises(NotImplementedError, match="reflect"):
        lo.kb_pad(torch.randn(1, 2, 4), (1, 1), mode="reflect")


@pytest.mark.parametrize("sizes", [(2, 1, 3), ((1, 2, 2),), (2, 1, 1, 2)])
def test_repeat(sizes):
    x = transposed(2, 3, 4)[:, :, :3]
    assert_matches(layout_only(lo.kb_repeat, x, *sizes), x.repeat(*sizes))


@pytest.mark.parametrize("dims", [(0,), ([1, 2],), (0, -1)])
def test_flip(dims):
    x = torch.randn(4, 6, 3)[:, ::2].transpose(0, 2)
    expected = x.flip(*dims) if isinstance(dims[0], int) else torch.flip(x, dims[0])
    assert_matches(layout_only(lo.kb_flip, x, *dims), expected)


# einops patterns as KernelBench's Mamba2 files and common models use them: (pattern, axis
# lengths, input shape).
REARRANGES = {
    "mamba2_blocks": ("b (c l) ... -> b c l ...", {"l": 4}, (2, 8, 3, 2)),
    "mamba2_heads_first": ("b c l h -> b h c l", {}, (2, 2, 4, 3)),
    "mamba2_merge": ("b c l h p -> b (c l) h p", {}, (2, 2, 4, 3, 5)),
    "ellipsis_grouped": ("b ... h -> b h (...)", {}, (2, 3, 4, 5)),
    "unit_axis": ("b c l h -> b c 1 l (h)", {}, (2, 2, 4, 3)),
    "split_and_move": ("(g b) c l h -> b c (h g) l", {"g": 2}, (4, 2, 3, 5)),
}


@pytest.mark.parametrize("case", REARRANGES)
def test_rearrange_matches_einops(case):
    pattern, lengths, shape = REARRANGES[case]
    x = transposed(*shape)
    expected = einops.rearrange(x, pattern, **lengths)
    assert_matches(layout_only(lo.kb_rearrange, x, pattern, **lengths), expected)


def test_rearrange_refuses_patterns_it_cannot_follow():
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match="each axis once"):
        lo.kb_rearrange(x, "a b -> a")
    with pytest.raises(ValueError, match="cannot infer"):
        lo.kb_rearrange(x, "(a c) b -> a c b")
    with pytest.raises(ValueError, match="cannot be split"):
        lo.kb_rearrange(x, "(a c) b -> a c b", a=3)
    with pytest.raises(NotImplementedError, match="axis length 2"):
        lo.kb_rearrange(x, "a b -> a b 2")
    with pytest.raises(ValueError, match="unbalanced"):
        lo.kb_rearrange(x, "(a b -> a b")
    with pytest.raises(ValueError, match="cannot parse"):
        lo.kb_rearrange(x, "a b -> a b!")
