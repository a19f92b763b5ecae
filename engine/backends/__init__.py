"""Evaluation backends: `cuda` and `cpu` (LocalBackend, real workers) and `sim` (synthetic)."""

from __future__ import annotations

from engine.backends.base import BACKENDS, Backend

CHOICES = (*BACKENDS, "auto")


def resolve_backend(name: str) -> str:
    """A backend name with `auto` made concrete: cuda when PyTorch sees a GPU, else cpu; cuda
    without a GPU is refused before anything starts."""
    if name not in CHOICES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(CHOICES)}")
    if name not in ("auto", "cuda"):
        return name
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "--backend cuda needs a GPU that PyTorch can see (this PyTorch is "
            f"{torch.__version__}); use --backend cpu or auto, or install PyTorch's CUDA build"
        )
    return "cuda" if torch.cuda.is_available() else "cpu"


def make_backend(name: str) -> Backend:
    name = resolve_backend(name)
    if name == "sim":
        from engine.backends.sim import SimBackend

        return SimBackend()
    from engine.backends.local import LocalBackend

    return LocalBackend(device=name)


__all__ = ["BACKENDS", "CHOICES", "Backend", "make_backend", "resolve_backend"]
