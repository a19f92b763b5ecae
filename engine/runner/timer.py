"""One bracketed repetition: the L2 flushed, then the call timed by CUDA events on the current
stream and by the host clock up to a device-wide synchronize, so work the call left on any stream
is inside the host figure. The judge uses the same class for the reference."""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager

import torch

# Bytes written to flush L2 when the device cannot say its L2 size (H200: 50 MiB).
DEFAULT_L2_BYTES = 64 << 20


def l2_flush_buffer() -> torch.Tensor:
    """A cuda buffer twice the L2's size: zeroing it evicts whatever a call left in L2."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES
    return torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")


class Bracket:
    def __init__(self, device: str):
        self.device = device
        if device == "cuda":
            self.flush_buffer = l2_flush_buffer()

    def rep(self, fn, args) -> tuple[float, float, object]:
        """(event_ms, host_ms, output) of one call; on cpu both figures are the host clock."""
        if self.device != "cuda":
            start = time.perf_counter()
            out = fn(*args)
            host = (time.perf_counter() - start) * 1e3
            return host, host, out
        self.flush_buffer.zero_()
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start = time.perf_counter()
        begin.record()
        out = fn(*args)
        end.record()
        torch.cuda.synchronize()
        host = (time.perf_counter() - start) * 1e3
        return begin.elapsed_time(end), host, out


def noop(*args):
    return None


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off inside (after a collection of the young
    generations: the old one, torch's modules among it, takes tens of milliseconds to scan): a
    collection that pauses a timed call or a fetch for milliseconds would show as its time."""
    enabled = gc.isenabled()
    gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
