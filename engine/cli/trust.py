"""What a user tells KernelBrain about the code it runs: whether candidates may run without the OS
sandbox, and which torch operators forward may compute with. The sandbox rule is one for every
command: code the hint library wrote (the offline generator's) may run without bubblewrap; any
other candidate code (an LLM's, a user's) runs only in it, unless the user passes
--trust-candidates."""

from __future__ import annotations

import argparse
import re

from engine import settings
from engine.cli import UsageError

OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# How to install bubblewrap on the common distributions (README's install line says the same).
BUBBLEWRAP_INSTALL = (
    "apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora, RHEL), "
    "pacman -S bubblewrap (Arch), zypper install bubblewrap (openSUSE), "
    "apk add bubblewrap (Alpine)"
)
# `1`: the user trusts candidate code, as with --trust-candidates. run and resume set it for the
# engine processes they start (the detached engine behind the TUI, the TUI's restarts of it).
TRUST_SWITCH = settings.TRUST_CANDIDATES
# The generator whose candidates are the hint library's own code.
HINT_LIBRARY_GENERATOR = "offline"


def torch_op_list(text: str) -> tuple[str, ...]:
    """`mm,addmm` -> ("mm", "addmm"); a usage error names what is not an operator name."""
    ops = tuple(op.strip() for op in text.split(",") if op.strip())
    bad = [op for op in ops if not OP_NAME.fullmatch(op)]
    if not ops or bad:
        raise argparse.ArgumentTypeError(
            f"operator names separated by commas (mm,addmm), not {text!r}"
        )
    return ops


def add_trust_arguments(p) -> None:
    p.add_argument(
        "--allow-torch-ops", type=torch_op_list, default=(), metavar="OPS",
        help="torch operators ModelNew.forward may compute with, e.g. mm,addmm for a cuBLAS GEMM "
        "with a Triton epilogue (kept with the session, shown by show, the TUI and export)",
    )  # fmt: skip
    add_trust_candidates(p)


def add_trust_candidates(p) -> None:
    p.add_argument(
        "--trust-candidates", action="store_true",
        help="run candidate code without the OS sandbox where it cannot be had (code you trust; "
        f"{TRUST_SWITCH}=1 says the same)",
    )  # fmt: skip


def candidates_trusted(args) -> bool:
    """Whether the user said candidate code may run without the OS sandbox."""
    return bool(getattr(args, "trust_candidates", False)) or settings.value(TRUST_SWITCH)


def sandbox_hint() -> str:
    """How to have the OS sandbox on this machine, where `isolation()` says there is none."""
    from engine.worker.sandbox import BWRAP_SWITCH, bwrap_binary

    if settings.value(BWRAP_SWITCH) == "0":
        return (
            f"unset {BWRAP_SWITCH} to use bubblewrap; where it is missing, install it: "
            f"{BUBBLEWRAP_INSTALL}"
        )
    if bwrap_binary() is None:
        return f"install bubblewrap: {BUBBLEWRAP_INSTALL}"
    return (
        "bubblewrap is there but cannot build the sandbox: it needs unprivileged user "
        "namespaces, which some kernels and containers turn off"
    )


def _without_sandbox(box) -> str:
    """Why `box` (an unsandboxed `isolation()`) is what it is, and how to have the sandbox."""
    from engine.worker.sandbox import BWRAP_SWITCH

    reason = box.detail.removeprefix("none: ").split("; candidates run as plain processes")[0]
    if settings.value(BWRAP_SWITCH) == "0":
        reason = f"turned off by {BWRAP_SWITCH}=0"
    return f"{reason}; {sandbox_hint()}"


def refuse_without_sandbox(trusted: bool) -> None:
    """A usage error when candidate code would run unsandboxed and the user did not say it is
    trusted."""
    from engine.worker.sandbox import isolation

    box = isolation()
    if not box.sandboxed and not trusted:
        raise UsageError(
            f"refusing to run candidate code without the OS sandbox ({_without_sandbox(box)}); "
            "or pass --trust-candidates for code you trust"
        )


def candidate_isolation(generator: str, backend: str, trusted: bool) -> str | None:
    """The line run and resume say once at start: which isolation the candidates of a session
    (its generator, its backend) run under; None on the sim backend, which runs none. Code other
    than the hint library's runs without the sandbox only when `trusted`; else a usage error
    that says how to have the sandbox."""
    from engine.worker.sandbox import isolation

    if backend == "sim":  # synthetic timings: candidate code is read, never run
        return None
    box = isolation()
    if box.sandboxed:
        return "candidates run in the bubblewrap sandbox"
    if generator == HINT_LIBRARY_GENERATOR:
        return (
            f"candidates run without the OS sandbox ({_without_sandbox(box)}); they are the hint "
            "library's own code"
        )
    refuse_without_sandbox(trusted)
    whose = "code an LLM wrote" if generator == "llm" else "code not the hint library's"
    return (
        f"candidates run without the OS sandbox ({_without_sandbox(box)}), as "
        f"--trust-candidates allows: {whose}, which you trust"
    )
