"""The runner's fetch of a timed output at the judge's positions reads only those positions."""

import torch

from engine.runner.session import gather_flat


def test_positions_are_read_through_the_strides_of_any_layout():
    x = torch.randn(6, 5, 4)
    index = torch.tensor([0, 7, 33, 119, 120, 500])
    for view in (x, x.permute(2, 0, 1), x[:, ::2], x.transpose(0, 1)):
        expected = view.contiguous().reshape(-1)[index % view.numel()]
        assert torch.equal(gather_flat(view, index), expected)
    assert torch.equal(gather_flat(torch.tensor(3.5), index), torch.full((6,), 3.5))


def test_a_huge_view_is_not_copied():
    """A broadcast view of 2^40 elements (4 TiB as a copy) is read at its positions alone."""
    huge = torch.arange(8.0).reshape(8, 1).expand(8, 1 << 37)
    index = torch.tensor([0, (1 << 37) + 5, (5 << 37) + 9, (1 << 40) - 1])
    assert gather_flat(huge, index).tolist() == [0.0, 1.0, 5.0, 7.0]
