"""Admission by memory: `bench --jobs` starts a problem only while the estimates of the problems
running beside it, its own included, fit in the memory given to the bench, so that no `--jobs`
value oversubscribes the machine (on the H200, 23 KernelBench files six at a time ran the host out
of memory: judges that could not load torch, candidates recorded as crashed).

A problem's estimate is its largest size's tensors, measured on the meta device (nothing is
allocated), times what the evaluation plane keeps of them, plus what its processes cost:
- on the device: the judge's input sets and the spare each rotation rolls into, the float64
  reference (inputs, weights and outputs in float64), the reference's and the candidate's outputs
  and the buffers they cross in, and the timing process's inputs and outputs for eager and
  torch.compile; and a CUDA context for each of the judge, the runner and the timing process;
- on the host (the device's share on the cpu backend): a process that has imported torch for
  each of the judge, the runner template and its runner, the compile worker and the timing
  process.
The reference banks are not counted here: all of a GPU's judges together keep theirs within a
fixed share (engine.worker.reference_bank), which `memory_given` leaves out.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

GiB = 1 << 30
# Copies of the largest input the device holds for one evaluation: rung 2's 4 input sets, the
# spare of each rotation, the reference's copy and the timing process's.
INPUT_COPIES = 7
OUTPUT_COPIES = 6  # the reference's, the candidate's, their crossing, a fetch, eager's, compile's
FLOAT64_FACTOR = 2  # the float64 reference of fp32 tensors
CONTEXT_BYTES = GiB // 2  # one CUDA context with torch's kernels loaded
# Resident size of a process that has imported torch and Triton, with room: on cpu 0.2-0.3 GiB
# (measured here); with CUDA's libraries and a context, a guess not measured on the H200.
PROCESS_BYTES = {"cpu": GiB, "cuda": 2 * GiB}
PROCESSES = 4  # judge, runner template and runner (forked: shared pages), compile worker, timing
CONTEXTS = 3  # judge, runner, timing process


@dataclass(frozen=True)
class Footprint:
    """Bytes one problem's bench holds at most: on the host and on its GPU."""

    host: int
    gpu: int

    def __str__(self) -> str:
        return f"host {self.host / GiB:.1f} GiB, GPU {self.gpu / GiB:.1f} GiB"


def tensor_bytes(values) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def data_bytes(problem, labels) -> int:
    """What the evaluation plane keeps of the largest of `labels`' sizes, by the factors above:
    measured on the meta device, so nothing is allocated."""
    import torch

    from engine.gate.correctness import as_list, make_inputs
    from engine.problems.loader import import_module_from
    from engine.problems.trace import module_model_on_meta, on_meta_device

    module = import_module_from(problem.path, "problem")
    largest = 0
    for label in labels:
        params = problem.size(label).params
        inputs = make_inputs(module, params, 0, "meta")
        model = module_model_on_meta(module, params)  # a Swin's `.item()`: built on the cpu
        weights = tensor_bytes([*model.parameters(), *model.buffers()])
        try:
            with torch.no_grad(), on_meta_device():  # an LSTM by its shapes, not step by step
                outputs = tensor_bytes(as_list(model(*inputs)))
        except Exception:  # an operator without a meta kernel: outputs as large as inputs
            outputs = tensor_bytes(inputs)
        size = tensor_bytes(inputs)
        float64 = FLOAT64_FACTOR * (size + weights + outputs)
        kept = INPUT_COPIES * size + OUTPUT_COPIES * outputs + 2 * weights + float64
        largest = max(largest, kept)
    return largest


def footprint(problem, labels, device: str) -> Footprint:
    """The estimate of one problem benched on `device` at `labels` (sim allocates nothing)."""
    if device == "sim":
        return Footprint(host=0, gpu=0)
    data = data_bytes(problem, labels)
    processes = PROCESSES * PROCESS_BYTES[device]
    if device == "cuda":
        return Footprint(host=processes, gpu=data + CONTEXTS * CONTEXT_BYTES)
    return Footprint(host=processes + data, gpu=0)


def available_host_bytes(backend: str) -> int:
    """MemAvailable of /proc/meminfo, less what the reference banks may keep on the host."""
    from engine.worker.device_memory import host_available_bytes
    from engine.worker.reference_bank import CPU_DEVICE_BYTES, HOST_BYTES

    banks = HOST_BYTES if backend == "cuda" else CPU_DEVICE_BYTES
    return host_available_bytes() - banks


def available_gpu_bytes(gpu: int) -> int:
    """Free memory of GPU `gpu`, less the share the reference banks may keep there (asked in a
    process of its own: the bench's keeps no CUDA context)."""
    from engine.worker.reference_bank import GPU_SHARE

    ask = f"import torch; print(*torch.cuda.mem_get_info({gpu}))"
    answer = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    free, total = map(int, answer.split())
    return int(free - GPU_SHARE * total)


def memory_given(backend: str, gpu: int) -> tuple[int | None, int | None]:
    """(host, GPU) bytes the bench may fill on `backend` (sim: not limited)."""
    if backend == "sim":
        return None, None
    gpu_bytes = available_gpu_bytes(gpu) if backend == "cuda" else None
    return available_host_bytes(backend), gpu_bytes


class Admission:
    """At most `jobs` problems at once, and among them only as many as fit in `host` and `gpu`
    bytes (None: not limited); a problem larger than the whole runs alone."""

    def __init__(self, jobs: int, host: int | None, gpu: int | None):
        self.jobs, self.host, self.gpu = jobs, host, gpu
        self.running: list[Footprint] = []
        self.changed = threading.Condition()

    def fits(self, wanted: Footprint) -> bool:
        if not self.running:
            return True
        if len(self.running) >= self.jobs:
            return False
        held = [*self.running, wanted]
        return all(limit is None or sum(getattr(f, kind) for f in held) <= limit
                   for kind, limit in (("host", self.host), ("gpu", self.gpu)))  # fmt: skip

    @contextmanager
    def admitted(self, wanted: Footprint):
        """Wait until `wanted` fits beside what runs, hold it while inside."""
        with self.changed:
            self.changed.wait_for(lambda: self.fits(wanted))
            self.running.append(wanted)
        try:
            yield
        finally:
            with self.changed:
                self.running.remove(wanted)
                self.changed.notify_all()


def chosen(jobs: int, memory: tuple[int | None, int | None]) -> str:
    """What `bench` says of the jobs it runs."""
    given = [f"{kind} {limit / GiB:.0f} GiB" for kind, limit in zip(("host", "GPU"), memory,
             strict=True) if limit is not None]  # fmt: skip
    if jobs == 1 or not given:
        return f"{jobs} problem(s) at a time"
    return (f"up to {jobs} problems at a time, as many as their estimated memory fits in "
            f"{' and '.join(given)}")  # fmt: skip


def auto_jobs(cores: int | None = None) -> int:
    """`--jobs auto`'s ceiling, before memory: a problem's compile worker and judge keep about
    two cores busy between GPU turns."""
    return max(1, math.floor((cores or os.cpu_count() or 2) / 2))
