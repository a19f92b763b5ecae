"""Big tensors between the judge and a cuda runner without a trip through the host: the judge
copies each into GPU memory it exports (engine.runner.cuda_share) and sends the descriptors over
the runner's share socket; the runner maps them. Outputs come back the same way, into buffers
the judge allocated with the reference's dtype and shape, and the mutation check reads the very
input memory the runner used. Small tensors and plain values still cross as files.

The judge owns every shared allocation and releases them when the evaluation ends; what the
runner writes there is data like any reply.
"""

from __future__ import annotations

import math
import os
import socket

import torch

from engine.runner.cuda_share import CudaShareError, Shared
from engine.runner.exchange import DTYPES, dtype_name, encode_values
from engine.worker.failures import judge_ran_out_of_memory

# Tensors smaller than this cross as files (a file costs less than an allocation there).
SHARE_MIN_BYTES = 1 << 20


def allocate(nbytes: int) -> Shared:
    """A shared buffer of `nbytes`. The driver allocates it, and cannot reuse the blocks that
    torch's caching allocator keeps from the judge's freed tensors (a float64 reference of a 16 GiB
    input caches 32 GiB): where the driver runs short, those go back to it and it is asked again."""
    try:
        return Shared.allocate(nbytes)
    except CudaShareError as exc:
        if not judge_ran_out_of_memory(exc):
            raise
        torch.cuda.empty_cache()
        return Shared.allocate(nbytes)


class DeviceExchange:
    def __init__(self, share_socket: socket.socket):
        self.socket = share_socket
        self.buffers: list[Shared] = []
        self.outbox: list[int] = []  # exported descriptors for the next command

    def _export(self, dtype: torch.dtype, shape: list[int]) -> dict:
        """A new shared buffer for a tensor of `dtype` and `shape`, exported for the next
        command; its description."""
        shared = allocate(math.prod(shape) * torch.empty((), dtype=dtype).element_size())
        self.buffers.append(shared)
        self.outbox.append(shared.export_fd())
        return {"index": len(self.outbox) - 1, "buffer": len(self.buffers) - 1,
                "nbytes": shared.nbytes, "dtype": dtype_name(dtype), "shape": shape}  # fmt: skip

    def _share(self, tensor: torch.Tensor) -> dict:
        described = self._export(tensor.dtype, list(tensor.shape))
        self.tensor_view(described).copy_(tensor)
        return described

    def encode(self, folder: str, prefix: str, values: list) -> list[dict]:
        """Like encode_values, with big cuda tensors shared instead of written."""
        encoded = []
        for i, value in enumerate(values):
            big = isinstance(value, torch.Tensor) and value.is_cuda
            if big and value.numel() * value.element_size() >= SHARE_MIN_BYTES:
                encoded.append({"shared": self._share(value)})
            else:
                encoded += encode_values(folder, f"{prefix}{i}_", [value])
        return encoded

    def output_buffers(self, expected: list[torch.Tensor]) -> list[dict]:
        """Shared buffers for the outputs, of the reference's dtypes and shapes."""
        return [self._export(e.dtype, list(e.shape)) for e in expected]

    def send(self, message: dict) -> dict:
        """Send the descriptors the message refers to; the message says how many follow."""
        fds, self.outbox = self.outbox, []
        if fds:
            torch.cuda.synchronize()  # the copies are in place before the runner looks
            socket.send_fds(self.socket, [b"fds"], fds)
            for fd in fds:
                os.close(fd)  # the runner holds its own copies now
        return {**message, "fds": len(fds)}

    def tensor_view(self, described: dict) -> torch.Tensor:
        """The shared buffer `described`, as the tensor it was made for (no copy)."""
        shared = self.buffers[described["buffer"]]
        return shared.tensor(DTYPES[described["dtype"]], described["shape"])

    def tensor(self, described: dict) -> torch.Tensor:
        """A private copy of what a shared buffer now holds."""
        return self.tensor_view(described).clone()

    def close(self) -> None:
        for shared in self.buffers:
            try:
                shared.close()
            except CudaShareError:
                pass  # the driver frees it with the process in the worst case
        self.buffers = []
