"""GPU memory shared between the judge and a runner without a copy through the host: CUDA
virtual-memory allocations exported as file descriptors (`cuMemExportToShareableHandle`, POSIX
fd), which cross the sandbox over a Unix socket like any descriptor. (torch's own CUDA IPC
handles do not open across the sandbox's PID namespace.)

The exporter owns the memory; the importer maps it for as long as it holds the `Shared` object
(or the tensors viewing it) and unmaps it with `close`."""

from __future__ import annotations

import ctypes
import os

import torch

_PINNED, _POSIX_FD, _ON_DEVICE, _READ_WRITE = 1, 1, 1, 3


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int),
                ("location", _Location), ("win32_metadata", ctypes.c_void_p),
                ("flags", ctypes.c_uint64)]  # fmt: skip


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


CUDA_ERROR_OUT_OF_MEMORY = 2


class CudaShareError(RuntimeError):
    pass


_driver = None


def _call(name: str, *args) -> None:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
    status = getattr(_driver, name)(*args)
    if status != 0:
        raise driver_error(name, status)


def driver_error(name: str, status: int) -> CudaShareError:
    """The error of driver call `name` that returned `status`, out of memory named as such."""
    named = " (out of memory)" if status == CUDA_ERROR_OUT_OF_MEMORY else ""
    return CudaShareError(f"{name} failed with CUDA error {status}{named}")


def _prop(device: int) -> _AllocationProp:
    return _AllocationProp(_PINNED, _POSIX_FD, _Location(_ON_DEVICE, device), None, 0)


def _mapped_size(nbytes: int) -> int:
    """`nbytes` rounded up to the current device's allocation granularity (at least one)."""
    torch.cuda.synchronize()  # the context exists and is current
    granularity = ctypes.c_size_t()
    prop = _prop(torch.cuda.current_device())
    _call("cuMemGetAllocationGranularity", ctypes.byref(granularity), ctypes.byref(prop), 0)
    step = granularity.value
    return max(step, (nbytes + step - 1) // step * step)


class _ArrayInterface:
    """What torch.as_tensor needs to view device memory it does not own."""

    def __init__(self, pointer: int, nbytes: int, owner: Shared):
        self.owner = owner  # the mapping lives as long as any tensor viewing it
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (pointer, False), "version": 2,
                                         "strides": None}  # fmt: skip


class Shared:
    """One mapped allocation of at least `nbytes` on the current device."""

    def __init__(self, handle: int, size: int, nbytes: int):
        self.handle, self.size, self.nbytes = handle, size, nbytes
        device = torch.cuda.current_device()
        pointer = ctypes.c_uint64()
        _call("cuMemAddressReserve", ctypes.byref(pointer), ctypes.c_size_t(size),
              ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0))  # fmt: skip
        self.pointer = pointer.value
        _call("cuMemMap", ctypes.c_uint64(self.pointer), ctypes.c_size_t(size),
              ctypes.c_size_t(0), ctypes.c_uint64(handle), ctypes.c_uint64(0))  # fmt: skip
        access = _AccessDesc(_Location(_ON_DEVICE, device), _READ_WRITE)
        _call("cuMemSetAccess", ctypes.c_uint64(self.pointer), ctypes.c_size_t(size),
              ctypes.byref(access), ctypes.c_size_t(1))  # fmt: skip

    @classmethod
    def allocate(cls, nbytes: int) -> Shared:
        """New exportable memory (rounded up to the allocation granularity)."""
        size = _mapped_size(nbytes)
        prop = _prop(torch.cuda.current_device())
        handle = ctypes.c_uint64()
        _call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
              ctypes.c_uint64(0))  # fmt: skip
        return cls(handle.value, size, nbytes)

    @classmethod
    def import_fd(cls, fd: int, nbytes: int) -> Shared:
        """Map memory another process exported as `fd` (the descriptor is closed here)."""
        size = _mapped_size(nbytes)
        handle = ctypes.c_uint64()
        try:
            _call("cuMemImportFromShareableHandle", ctypes.byref(handle),
                  ctypes.c_void_p(fd), ctypes.c_int(_POSIX_FD))  # fmt: skip
        finally:
            os.close(fd)
        return cls(handle.value, size, nbytes)

    def export_fd(self) -> int:
        fd = ctypes.c_int(-1)
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), ctypes.c_uint64(self.handle),
              ctypes.c_int(_POSIX_FD), ctypes.c_uint64(0))  # fmt: skip
        return fd.value

    def tensor(self, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
        """A tensor viewing the memory (no copy)."""
        raw = torch.as_tensor(_ArrayInterface(self.pointer, self.nbytes, self), device="cuda")
        return raw.view(dtype).view(shape)

    def close(self) -> None:
        """Unmap and release (the memory itself goes when no process maps it)."""
        if self.pointer:
            torch.cuda.synchronize()
            _call("cuMemUnmap", ctypes.c_uint64(self.pointer), ctypes.c_size_t(self.size))
            _call("cuMemAddressFree", ctypes.c_uint64(self.pointer), ctypes.c_size_t(self.size))
            _call("cuMemRelease", ctypes.c_uint64(self.handle))
            self.pointer = 0
