"""What a user tells KernelBrain about the code it runs: whether candidates may run without the OS
sandbox, and which torch operators forward may compute with."""

from __future__ import annotations

import argparse
import re

from engine.cli import UsageError

OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


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
    p.add_argument(
        "--trust-candidates", action="store_true",
        help="run candidate code without the OS sandbox where it cannot be had (code you trust)",
    )  # fmt: skip


def refuse_without_sandbox(trusted: bool) -> None:
    """A usage error when candidate code would run unsandboxed and the user did not say it is
    trusted."""
    from engine.worker.sandbox import isolation

    box = isolation()
    if not box.sandboxed and not trusted:
        raise UsageError(
            f"refusing to run candidate code without the OS sandbox ({box.detail}): install "
            "bubblewrap (apt-get install bubblewrap), or pass --trust-candidates for code you trust"
        )
