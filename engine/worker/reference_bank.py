"""The judge's reference bank: each check input set and its references (the judge's copy of the
inputs, the float64 reference, PyTorch's own output and error) computed once per judge process
and reused by every candidate checked on the same input set.

The engine draws check and re-check seeds from small per-session pools (engine.backends.local),
so candidates still see varied inputs while most references come from here. An entry is keyed by
what determines it: the problem file's contents, the size, the weights' and the inputs' seeds,
the device and the precision policy. Each entry's checksum, taken when it is stored, is checked
before every use; an entry that no longer matches is dropped and recomputed.

Memory is capped: entries live on the judge's device up to a share of its memory, and while the
device keeps a reserve free for the evaluation in hand, then move to host memory (pinned on cuda)
up to a cap, then the least recently used are dropped. Judges that share a GPU (`bench --jobs N`
runs N; KERNELBRAIN_JUDGES_PER_GPU says so) split both caps between them: a bank holds its
memory between its judge's turns on the GPU, and six banks of a quarter each, each filled while
half the GPU was free, ran other judges out of memory on the H200. An entry
larger than a quarter of the device's share is not banked, and one larger than HOST_ENTRY_BYTES
is dropped rather than moved: recomputing those costs less than keeping or moving them (softmax
at 4096x393216 holds 26 GB a reference). A dropped entry costs only its recomputation.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from engine import settings
from engine.gate.correctness import Reference
from engine.worker.device_memory import cuda_free_bytes, tensor_bytes

GPU_SHARE = 0.25  # of the device's memory, on cuda, for the banks of every judge sharing it
# Of the device's memory, what banks leave free (counting every process's use) for the
# evaluation that holds the GPU: its inputs, outputs and float64 references.
DEVICE_RESERVE = 0.5
HOST_BYTES = 16 << 30
HOST_ENTRY_BYTES = 1 << 30
CPU_DEVICE_BYTES = 4 << 30  # on the cpu backend "device" memory is host memory: one tier
JUDGES_PER_GPU = settings.JUDGES_PER_GPU


def judges_per_gpu() -> int:
    """How many judges share this judge's device (KERNELBRAIN_JUDGES_PER_GPU, else 1)."""
    return settings.value(JUDGES_PER_GPU)


def tensors(reference: Reference) -> list[torch.Tensor]:
    values = (*reference.inputs, *reference.ref64, *reference.expected)
    return [t for t in values if isinstance(t, torch.Tensor)]


def checksum(reference: Reference) -> list[str]:
    """Per tensor: the float64 sum of its elements and their float64 2-norm, reduced on the
    tensor's device without a float64 copy; as hex, so that NaN equals NaN."""
    sums = []
    for t in tensors(reference):
        x = t.detach().reshape(-1)
        x = x if x.is_floating_point() else x.to(torch.float32)
        sums += [float(torch.sum(x, dtype=torch.float64)).hex(),
                 float(torch.linalg.vector_norm(x, dtype=torch.float64)).hex()]  # fmt: skip
    return sums


def moved(reference: Reference, device) -> Reference:
    """The reference with every tensor on `device` (pinned when it goes to cuda's host)."""

    def move(value):
        if not isinstance(value, torch.Tensor):
            return value
        out = value.to(device)
        return out.pin_memory() if str(device) == "cpu" and value.is_cuda else out

    return Reference(
        inputs=[move(x) for x in reference.inputs],
        ref64=[move(x) for x in reference.ref64],
        expected=[move(x) for x in reference.expected],
        torch_error=reference.torch_error,
        ref_print=reference.ref_print,
        expected_print=reference.expected_print,
    )


@dataclass
class Entry:
    reference: Reference
    checksum: list[str]
    nbytes: int
    on_host: bool = False


class ReferenceBank:
    def __init__(self, device: str, device_bytes: int | None = None, host_bytes: int = HOST_BYTES,
                 free_bytes=None, reserve_bytes: int | None = None):  # fmt: skip
        """`free_bytes()`: the device's free memory, all processes counted (on cuda by default);
        entries leave the device while it is below `reserve_bytes`."""
        self.device = device
        sharers = judges_per_gpu()
        device_share = CPU_DEVICE_BYTES
        if device == "cuda":
            total = torch.cuda.get_device_properties(0).total_memory
            free_bytes = free_bytes or cuda_free_bytes
            reserve_bytes = int(DEVICE_RESERVE * total) if reserve_bytes is None else reserve_bytes
            device_share = int(GPU_SHARE * total)
        self.free_bytes, self.reserve_bytes = free_bytes, reserve_bytes or 0
        self.device_bytes = device_share // sharers if device_bytes is None else device_bytes
        self.host_bytes = host_bytes // sharers if device == "cuda" else 0
        self.entries: OrderedDict[tuple, Entry] = OrderedDict()
        self.counts = {"hits": 0, "misses": 0, "corrupt": 0, "dropped": 0}

    def get(self, key: tuple, compute) -> Reference:
        """The reference for `key`: the banked one when its checksum still holds, else
        `compute()`, banked for next time."""
        entry = self.entries.pop(key, None)
        if entry is not None:
            reference = moved(entry.reference, self.device) if entry.on_host else entry.reference
            if checksum(reference) == entry.checksum:
                self.counts["hits"] += 1
                self.entries[key] = entry
                return reference
            self.counts["corrupt"] += 1
        self.counts["misses"] += 1
        reference = compute()
        nbytes = tensor_bytes(tensors(reference))
        if nbytes <= self.device_bytes // 4:
            self.entries[key] = Entry(reference, checksum(reference), nbytes)
            self._fit()
        return reference

    def drop_device_entries(self) -> None:
        """Give the device's memory back (the judge ran short of it): entries on the device go."""
        for key in [k for k, e in self.entries.items() if not e.on_host]:
            del self.entries[key]
            self.counts["dropped"] += 1

    def _fit(self) -> None:
        """Move the least recently used entries to host memory, then drop them, until each
        tier is within its cap and the device keeps its reserve."""
        for entry in self.entries.values():
            if self._bytes(on_host=False) <= self.device_bytes and not self._short_of_memory():
                break
            if not entry.on_host and entry.nbytes <= min(self.host_bytes, HOST_ENTRY_BYTES):
                entry.reference = moved(entry.reference, "cpu")
                entry.on_host = True
        while self.entries and (
            self._bytes(on_host=True) > self.host_bytes
            or self._bytes(on_host=False) > self.device_bytes
        ):
            self.entries.popitem(last=False)
            self.counts["dropped"] += 1
        for key in [k for k, e in self.entries.items() if not e.on_host]:
            if not self._short_of_memory():
                break
            del self.entries[key]  # too large for host memory
            self.counts["dropped"] += 1

    def _short_of_memory(self) -> bool:
        return self.free_bytes is not None and self.free_bytes() < self.reserve_bytes

    def _bytes(self, on_host: bool) -> int:
        return sum(e.nbytes for e in self.entries.values() if e.on_host == on_host)
