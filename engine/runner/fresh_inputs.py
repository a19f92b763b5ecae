"""New contents at new addresses for the timed input sets, done alike by the judge (on its copies)
and the runner (on its own), so that no timed call's inputs repeat an earlier call's by contents,
version counter or address, and no output kept from an earlier call answers a later one."""

from __future__ import annotations

import torch


def roll_amount(shift: int, numel: int) -> int:
    """Places to roll a tensor of `numel` elements by: 1 to numel - 1, never all of them."""
    return 1 + shift % (numel - 1)


def roll_into(target: torch.Tensor, source: torch.Tensor, shift: int) -> None:
    """`source`'s flat (row-major) elements rolled into `target`: the values keep their
    distribution and every position's content changes. Contiguous tensors need no temporary
    (a copy of a huge input would double its memory)."""
    n = source.numel()
    places = roll_amount(shift, n)
    if source.is_contiguous() and target.is_contiguous():
        flat_source, flat_target = source.view(-1), target.view(-1)
        flat_target[places:].copy_(flat_source[: n - places])
        flat_target[:places].copy_(flat_source[n - places :])
    else:
        target.copy_(source.reshape(-1).roll(places).view(source.shape))


def _rolled(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1


class InputRotation:
    """The input sets (lists of arguments, changed in place) and one spare buffer per layout:
    each float input is rolled into the spare, which takes its place, and the old buffer becomes
    the spare. Memory is one input more at most, what a rolled temporary cost before."""

    def __init__(self, input_sets: list[list]):
        self.sets = input_sets
        self.spares: dict[tuple, torch.Tensor] = {}

    def shift(self, shift: int) -> None:
        for k in range(len(self.sets)):
            self.shift_set(k, shift)

    def shift_set(self, k: int, shift: int) -> None:
        args = self.sets[k]
        for i, x in enumerate(args):
            if not _rolled(x):
                continue
            layout = (x.dtype, x.shape, x.stride(), x.device)
            spare = self.spares.pop(layout, None)
            if spare is None:
                spare = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
            roll_into(spare, x, shift)
            args[i], self.spares[layout] = spare, x
