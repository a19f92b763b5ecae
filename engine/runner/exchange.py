"""Tensors between the judge and a runner: raw bytes in files of a shared folder (tmpfs), described
by plain JSON (file, dtype, shape). The reader rebuilds a plain contiguous tensor from the bytes."""

from __future__ import annotations

import math
import os
import stat

import torch

DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
    )
}


class ExchangeError(ValueError):
    """A description or a file that does not match what it claims to hold."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def write_tensor(folder: str, name: str, tensor: torch.Tensor) -> dict:
    """Write `tensor`'s values (contiguous, on the host) to folder/name; return its description."""
    host = tensor.detach().contiguous().cpu()
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        if host.numel():
            host.reshape(-1).view(torch.uint8).numpy().tofile(f)  # no copy; 0-dim too
    return {"file": name, "dtype": dtype_name(host.dtype), "shape": list(host.shape)}


def read_tensor(folder: str, desc: dict, shared: bool = False) -> torch.Tensor:
    """The tensor a description names, rebuilt from its file's bytes on the host. `shared` maps
    the file (writes go to the file, the other side sees them) instead of copying it: only for a
    reader that trusts the writer (the runner reading the judge's files)."""
    name, shape = desc.get("file"), desc.get("shape")
    dtype = DTYPES.get(desc.get("dtype"))
    valid_shape = isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)
    if not (isinstance(name, str) and os.path.basename(name) == name and dtype and valid_shape):
        raise ExchangeError(f"malformed tensor description {str(desc)[:200]}")
    path = os.path.join(folder, name)
    numel = math.prod(shape)
    expected = numel * torch.empty((), dtype=dtype).element_size()
    if shared:
        _check_size(name, os.path.getsize(path), expected, desc)
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.from_file(path, shared=True, size=numel, dtype=dtype).view(shape)
    # Opened without following a link (one could point anywhere on the reader's machine), a
    # regular file only, then read rather than mapped: a file the writer truncates meanwhile is
    # a short read, not a SIGBUS.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ExchangeError(f"{name} cannot be opened as a plain file: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ExchangeError(f"{name} is not a regular file")
        _check_size(name, info.st_size, expected, desc)
        out = torch.empty(expected, dtype=torch.uint8)
        got = f.readinto(out.numpy()) if expected else 0
    if got != expected:
        raise ExchangeError(f"{name} shrank while it was read ({got} of {expected} bytes)")
    return out.view(dtype).view(shape)


def _check_size(name: str, size: int, expected: int, desc: dict) -> None:
    if size != expected:
        raise ExchangeError(
            f"{name} holds {size} bytes; {desc['shape']} of {desc['dtype']} needs {expected}"
        )


def describe_meta(tensor: torch.Tensor) -> dict:
    return {"dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape),
            "stride": list(tensor.stride())}  # fmt: skip


def meta_tensor(desc: dict) -> torch.Tensor:
    """A tensor without memory of the described dtype, shape and strides."""
    return torch.empty_strided(desc["shape"], desc["stride"], dtype=DTYPES[desc["dtype"]],
                               device="meta")  # fmt: skip


def encode_values(folder: str, prefix: str, values) -> list[dict]:
    """Arguments as descriptions: tensors to files, plain values (numbers, strings, lists) as is."""
    encoded = []
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor) and value.is_meta:  # a shape alone (compile box)
            encoded.append({"meta": describe_meta(value)})
        elif isinstance(value, torch.Tensor):
            encoded.append({"tensor": write_tensor(folder, f"{prefix}{i}", value)})
        elif value is None or isinstance(value, (bool, int, float, str, list, tuple)):
            encoded.append({"value": value})
        else:
            raise ExchangeError(
                f"argument {i} is a {type(value).__name__}; only tensors and plain "
                "values cross to the runner"
            )
    return encoded


def decode_values(
    folder: str, encoded: list, device: str, shared: bool = False, imported=None
) -> list:
    """The arguments that `encode_values` described, tensors on `device`; `imported` turns the
    description of shared GPU memory into a tensor (engine.worker.device_exchange)."""
    values = []
    for item in encoded:
        if "shared" in item:
            if imported is None:
                raise ExchangeError("shared memory where none was offered")
            values.append(imported(item["shared"]))
        elif "meta" in item:
            values.append(meta_tensor(item["meta"]))
        elif "tensor" in item:
            if device == "cpu":
                values.append(read_tensor(folder, item["tensor"], shared=shared))
            else:  # the file mapped, then copied once onto the device
                values.append(read_tensor(folder, item["tensor"], shared=True).to(device))
        else:
            values.append(item["value"])
    return values
