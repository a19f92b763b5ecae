"""Time a candidate against its reference inside a worker: warm-up, several input sets in
rotation, the two interleaved in alternating order, CUDA events with the L2 flushed before
each repetition (perf_counter on cpu, where the numbers mean nothing)."""

from __future__ import annotations

import time

import torch

# Bytes written to flush L2 when the device cannot say its L2 size (H200: 50 MiB).
DEFAULT_L2_BYTES = 64 << 20


class CudaTimer:
    """CUDA events around each call, after writing a buffer twice the L2 size."""

    def __init__(self):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES
        self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")

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


def time_pair(
    candidate, reference, input_sets: list, warmup: int, reps: int, interleave: bool, timer
) -> tuple[list[float], list[float]]:
    """Raw samples in ms of `candidate` and `reference`; repetition r uses input set r mod n.
    Interleaved, the order alternates each repetition so neither always runs second."""
    with torch.no_grad():
        for r in range(warmup):
            args = input_sets[r % len(input_sets)]
            candidate(*args)
            reference(*args)
        if interleave:
            samples = time_round_robin(
                {"cand": candidate, "ref": reference}, input_sets, reps, timer
            )
            return samples["cand"], samples["ref"]
        cand = [timer.measure(candidate, input_sets[r % len(input_sets)]) for r in range(reps)]
        ref = [timer.measure(reference, input_sets[r % len(input_sets)]) for r in range(reps)]
        return timer.resolve(cand), timer.resolve(ref)
