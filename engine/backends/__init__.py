"""Evaluation backends: `cuda` and `cpu` (LocalBackend, real workers) and `sim` (synthetic)."""

from __future__ import annotations

from engine.backends.base import BACKENDS, Backend
from engine.errors import InputError, SetupError

CHOICES = (*BACKENDS, "auto")


def resolve_backend(name: str, ray: str | None = None) -> str:
    """A backend name with `auto` made concrete: cuda when PyTorch sees a GPU (with `ray`, when
    the Ray cluster has one), else cpu; cuda without a GPU is refused before anything starts."""
    if name not in CHOICES:
        raise InputError(f"unknown backend {name!r}; choose one of {', '.join(CHOICES)}")
    if name not in ("auto", "cuda"):
        return name
    if ray is not None:
        from engine.backends.ray_fleet import cluster_gpus, connect

        connect(ray)
        if name == "cuda" and not cluster_gpus():
            raise SetupError(f"--backend cuda: the Ray cluster ({ray}) has no GPU")
        return "cuda" if cluster_gpus() else "cpu"
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise SetupError(
            "--backend cuda needs a GPU that PyTorch can see (this PyTorch is "
            f"{torch.__version__}); use --backend cpu or auto, or install PyTorch's CUDA build"
        )
    return "cuda" if torch.cuda.is_available() else "cpu"


GPUS_HELP = (
    "devices to evaluate on, one evaluation each at a time: 'all' (every GPU PyTorch sees; one "
    "device on cpu and sim), a count (the first N; on sim N simulated devices, on cpu N judges "
    "side by side) or indices like 0,2 (default: 1, GPU 0: a box's other GPUs are often "
    "someone else's, and one search alone on one GPU times steadiest)"
)


def resolve_gpus(text: str, backend: str, ray: str | None = None) -> tuple[int, ...]:
    """The device indices `--gpus TEXT` names on a resolved backend; InputError says what to
    give instead. With `ray`, device i is the i-th actor, wherever Ray places it."""
    visible = None
    if ray is not None:
        from engine.backends.ray_fleet import cluster_gpus, connect

        if "," in text:
            raise InputError(f"--gpus {text!r} with --ray: give a count or 'all' (Ray places "
                             "each device's actor on a GPU it chooses)")  # fmt: skip
        connect(ray)  # here, before a session is written: an unreachable cluster is refused
        if backend == "cuda":
            visible = cluster_gpus()
    elif backend == "cuda":
        import torch

        visible = torch.cuda.device_count()
    text = text.strip()
    if text == "all":
        return tuple(range(visible)) if visible else (0,)
    try:
        if "," in text:
            gpus = tuple(int(part) for part in text.split(","))
        else:
            gpus = tuple(range(int(text)))
    except ValueError:
        raise InputError(f"--gpus {text!r}: {GPUS_HELP}") from None
    if not gpus or min(gpus) < 0 or len(set(gpus)) != len(gpus):
        raise InputError(f"--gpus {text!r} names no device, or one twice: {GPUS_HELP}")
    if visible is not None and max(gpus) >= visible:
        where = f"the Ray cluster ({ray}) has" if ray else "PyTorch sees"
        raise InputError(f"--gpus {text!r}: {where} {visible} GPU(s), 0 to {visible - 1}")
    return gpus


def make_backends(name: str, gpus: tuple[int, ...] = (0,), ray: str | None = None
                  ) -> list[Backend]:  # fmt: skip
    """One backend per device. On cpu and cuda the first one's compile workers and compiled
    kernels serve them all; with `ray`, one Ray actor per device holds each."""
    name = resolve_backend(name, ray)
    if ray is not None:
        from engine.backends.ray_fleet import connect, ray_backends

        connect(ray)
        return ray_backends(name, len(gpus))
    if name == "sim":
        from engine.backends.sim import SimBackend

        return [SimBackend() for _ in gpus]
    from engine.backends.local import LocalBackend

    first = LocalBackend(device=name, gpu=gpus[0])
    rest = [LocalBackend(device=name, gpu=gpu, compile_workers=0) for gpu in gpus[1:]]
    for backend in rest:
        backend.share_compiling(first)
    return [first, *rest]


def make_backend(name: str) -> Backend:
    return make_backends(name)[0]


__all__ = [
    "BACKENDS",
    "CHOICES",
    "Backend",
    "make_backend",
    "make_backends",
    "resolve_backend",
    "resolve_gpus",
]
