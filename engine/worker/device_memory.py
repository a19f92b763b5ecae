"""What one evaluation may take of its device's memory, decided from what the device has free
(every process counted) when the judge is about to take more, less what the user keeps for other
work (KERNELBRAIN_DEVICE_RESERVE_GB):

- a float64 reference waits in host memory where what the rest of the evaluation takes of the
  device would not fit beside it (the error is measured a slice at a time, each slice crossing);
- a timing rotates over fewer input sets where all of them would not fit.

On an H100 (80 GB), rmsnorm's full size (7 GiB a tensor) ran the judge out of memory otherwise:
its reference for a check held 4 tensors' worth (the inputs' copy, the float64 reference, PyTorch's
output), the shared inputs and output 2 more, the runner 3. On the cpu backend the device is host
memory: a reference stays where it is, and the sets are counted against MemAvailable.
"""

from __future__ import annotations

import torch

from engine import settings

DEVICE_RESERVE_GB = settings.DEVICE_RESERVE_GB
# What one checked call takes beside a reference, in copies of its inputs and outputs: the inputs
# shared with the runner, the output buffers, the runner's own output, the checks' temporaries.
CALL_COPIES = 4
# What each timing input set holds: the judge's copy, its copy shared with the runner, and the
# runner's own once the inputs get new contents at new addresses; one set more in passing.
SET_COPIES = 3
MARGIN_BYTES = 1 << 30  # contexts, kernels' workspaces and the allocators' rounding


def host_available_bytes() -> int:
    """MemAvailable of /proc/meminfo."""
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024


def cuda_free_bytes() -> int:
    """Free memory on the current GPU, after returning this process's cached blocks."""
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info()[0]


def free_bytes(device: str) -> int:
    """What the device has free for this evaluation, less the reserve the user keeps."""
    free = cuda_free_bytes() if device == "cuda" else host_available_bytes()
    return free - int(settings.value(DEVICE_RESERVE_GB) * (1 << 30))


def tensor_bytes(values) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def reference_to_host(in_bytes: int, out_bytes: int, free: int) -> bool:
    """Whether a float64 reference just computed on the GPU waits in host memory: a checked
    call on inputs and outputs of these sizes would not fit in `free` beside it."""
    return free < CALL_COPIES * (in_bytes + out_bytes) + MARGIN_BYTES


def input_sets_that_fit(wanted: int, in_bytes: int, out_bytes: int, free: int) -> int:
    """How many of `wanted` timing input sets fit in `free` (at least one), beside the outputs
    of the calls and the checks of the fetched ones."""
    room = free - MARGIN_BYTES - CALL_COPIES * out_bytes - in_bytes
    return max(1, min(wanted, room // max(SET_COPIES * in_bytes, 1)))
