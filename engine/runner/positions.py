"""The flat positions of a timed output that the judge checks. The judge sends a seed after the
call has run; the runner and the judge both draw the same positions from it, so no list of
thousands of positions crosses the channel (its encoding cost the fetch a millisecond more for a
large output than for the calibration's small one), and the runner still learns them only then."""

from __future__ import annotations

import torch

# Runs of contiguous elements at random starts: a fetch touches few pages of a large output.
RUNS, RUN_LENGTH = 64, 64


def fetch_positions(seed: int, numel: int) -> torch.Tensor:
    """Sorted distinct flat positions below `numel` (all of a small output), drawn from `seed`."""
    if numel <= RUNS * RUN_LENGTH:
        return torch.arange(numel)
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(numel - RUN_LENGTH + 1, (RUNS, 1), generator=generator)
    return torch.unique(starts + torch.arange(RUN_LENGTH))
