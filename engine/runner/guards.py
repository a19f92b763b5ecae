"""What the runner wraps around a candidate's forward call: new allocations poisoned (so unwritten
output shows), and the aten operators it reaches recorded (the early, clear message for work done
outside Triton; the judge decides what they mean)."""

from __future__ import annotations

import _thread
import contextlib
import math
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

POISONS = {"nan": math.nan, "finite": 0.0}
ALLOCATORS = frozenset({"empty", "empty_like", "empty_strided", "new_empty"})
# Tensor methods that hand tensor data to Python without an aten operator.
DATA_METHODS = frozenset({"numpy", "tolist", "item", "__array__", "__dlpack__"})


class PoisonAllocations(TorchFunctionMode):
    """Fills every tensor from empty/empty_like/empty_strided/new_empty with a poison value."""

    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in ALLOCATORS and isinstance(out, torch.Tensor) and out.numel():
            if out.is_floating_point() or out.is_complex():
                out.fill_(self.value)
            elif out.dtype != torch.bool:
                out.fill_(torch.iinfo(out.dtype).max)
        return out


def _from_triton() -> bool:
    """Whether Triton's own code (its interpreter or launcher) is the caller."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == "triton" or module.startswith("triton."):
            return True
        frame = frame.f_back
    return False


class OperatorLog(TorchDispatchMode):
    """Every aten operator that candidate code reaches (by any route: torch.*, Tensor methods,
    torch.ops.aten), by name, in order of first call; Triton's own calls are left out."""

    def __init__(self):
        super().__init__()
        self.names: dict[str, None] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in self.names and not _from_triton():
            self.names[name] = None
        return func(*args, **(kwargs or {}))


class DataMethodLog(TorchFunctionMode):
    """Tensor methods that read data into Python (`.numpy()`, `.tolist()`, `.item()`)."""

    def __init__(self, into: dict):
        super().__init__()
        self.into = into

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in DATA_METHODS and not _from_triton():
            self.into[name] = None
        return func(*args, **(kwargs or {}))


# Names the runner reports, beside aten operators, for what forward must not do.
STARTED_THREAD, MODES_TAMPERED = "start_new_thread", "torch_mode_stack_changed"


@contextlib.contextmanager
def no_threads(names: dict):
    """Refuse (and report) threads started by forward: the operator log sees only its own."""
    original = _thread.start_new_thread

    def refuse(*args, **kwargs):
        names[STARTED_THREAD] = None
        raise RuntimeError("ModelNew.forward may not start threads")

    _thread.start_new_thread = threading._start_new_thread = refuse
    try:
        yield
    finally:
        _thread.start_new_thread = threading._start_new_thread = original


def guarded_call(model, args: list, poison: str) -> tuple[object, list[str]]:
    """One forward call with allocations poisoned; returns (output, what it reached). A forward
    that removes the runner's modes from torch's mode stacks is reported as such."""
    log = OperatorLog()
    modes = (DataMethodLog(log.names), PoisonAllocations(POISONS[poison]))
    try:
        with torch.no_grad(), log, modes[0], modes[1], no_threads(log.names):
            out = model(*args)
            if log not in _get_current_dispatch_mode_stack() or not all(
                m in _get_current_function_mode_stack() for m in modes
            ):
                log.names[MODES_TAMPERED] = None
    except (RuntimeError, AssertionError, IndexError) as exc:
        if MODES_TAMPERED in log.names or STARTED_THREAD in log.names:
            return None, list(log.names)
        if "mode" in str(exc).lower():  # leaving a mode that forward popped
            return None, [*log.names, MODES_TAMPERED]
        raise
    return out, list(log.names)
