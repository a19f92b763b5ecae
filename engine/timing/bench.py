"""The bench's timers (its timing process: eager and torch.compile): several
input sets in rotation, contenders interleaved in a rotating order, CUDA events with the L2
flushed before each repetition (perf_counter on cpu, where the numbers mean nothing)."""

from __future__ import annotations

import time

import torch

from engine.runner.timer import l2_flush_buffer


class CudaTimer:
    """CUDA events around each call, after writing a buffer twice the L2 size."""

    def __init__(self):
        self.flush_buffer = l2_flush_buffer()

    def measure(self, fn, args):
        self.flush_buffer.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        return start, end

    def resolve(self, handles) -> list[float]:
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in handles]


class CpuTimer:
    """Wall-clock time of each call; on the interpreter this measures Python, not a GPU."""

    def measure(self, fn, args):
        start = time.perf_counter()
        fn(*args)
        return (time.perf_counter() - start) * 1e3

    def resolve(self, handles) -> list[float]:
        return list(handles)


def make_timer(device: str):
    return CudaTimer() if device == "cuda" else CpuTimer()


def time_round_robin(contenders: dict, input_sets: list, reps: int, timer) -> dict:
    """Raw samples in ms per contender; repetition r uses input set r mod n and starts the
    rotation at contender r mod k, so none always runs first or after the same neighbour."""
    names = list(contenders)
    handles = {name: [] for name in names}
    for r in range(reps):
        args = input_sets[r % len(input_sets)]
        k = r % len(names)
        for name in names[k:] + names[:k]:
            handles[name].append(timer.measure(contenders[name], args))
    return {name: timer.resolve(h) for name, h in handles.items()}
