"""The runner's fetch of a timed output at the judge's positions reads only those positions."""

import random

import torch

from engine.runner.positions import RUN_LENGTH, RUNS, fetch_positions
from engine.runner.session import gather_flat
from engine.worker.judged_timing import fetch_message


def test_the_judge_and_the_runner_draw_the_same_positions_from_the_fetchs_seed():
    """Only a seed crosses: both sides draw the same sorted, distinct runs of positions within
    the output, a fresh draw for each fetch; a small output is fetched whole."""
    rng = random.Random(3)
    first, second = fetch_message("c1", 10**9, rng), fetch_message("c2", 10**9, rng)
    assert set(first) == {"op", "tag", "seed", "numel"}
    drawn = fetch_positions(first["seed"], first["numel"])
    assert torch.equal(drawn, fetch_positions(first["seed"], first["numel"]))
    assert RUN_LENGTH * 2 <= drawn.numel() <= RUNS * RUN_LENGTH
    assert bool((drawn[1:] > drawn[:-1]).all()) and 0 <= int(drawn[0]) < int(drawn[-1]) < 10**9
    assert not torch.equal(drawn, fetch_positions(second["seed"], second["numel"]))
    assert fetch_positions(first["seed"], 100).tolist() == list(range(100))


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


def test_a_fetch_does_the_same_work_on_the_device_whatever_the_outputs_layout():
    """The judge calibrates the fetch on a flat tensor: for an output of any shape and strides
    the device does the same (the positions go over, one gather), the storage offsets being
    worked out on the host. The outputs live on the meta device here, standing for the GPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OnDevice(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.device.type == "meta":
                self.ops.append(func.overloadpacket.__name__)
            return out

    index = torch.tensor([3, 70, 1000, 4095])
    done = []
    for output in (torch.empty(4096, device="meta"),
                   torch.empty(4, 8, 16, 8, device="meta").permute(0, 2, 3, 1)):  # fmt: skip
        with OnDevice() as device:
            gather_flat(output, index)
        done.append(device.ops)
    assert done[0] == done[1] == ["as_strided", "_to_copy", "index"]
