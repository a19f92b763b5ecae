"""`kernelbrain doctor`: what this machine offers the search, and what is missing."""

from __future__ import annotations

import os

from engine import settings
from engine.backends import resolve_backend
from engine.cli.trust import sandbox_hint
from engine.worker.sandbox import is_credential, isolation


def register(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="report GPU, versions, ncu, backend and isolation")
    p.set_defaults(handler=run)


def ncu_line() -> str:
    try:
        from engine.profiler.ncu import ncu_status
    except ImportError as exc:
        return f"unknown (engine.profiler is not available: {exc})"
    ok, detail = ncu_status()
    return f"{'yes' if ok else 'no'}: {detail}"


def run(args) -> int:
    import torch
    import triton

    cuda = torch.cuda.is_available()
    box = isolation()
    gpu = torch.cuda.get_device_name(0) if cuda else "none (PyTorch sees no GPU)"
    rows = [
        ("GPU", gpu),
        ("CUDA", torch.version.cuda or "none (CPU build of PyTorch)"),
        ("torch", torch.__version__),
        ("triton", triton.__version__),
        ("ncu", ncu_line() if cuda else "not checked (no GPU)"),
        ("backend auto", resolve_backend("auto")),
        ("candidate sandbox", box.detail if box.sandboxed else f"{box.detail}; {sandbox_hint()}"),
        (
            "runner env",
            "nothing of the engine's environment (no keys, tokens or provider "
            "variables); only the GPU choice",
        ),
        ("keys set", ", ".join(sorted(k for k in os.environ if is_credential(k))) or "none"),
        *settings.describe(),  # every KERNELBRAIN_* variable: its value, or unset and default
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
