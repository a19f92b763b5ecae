"""Turn whatever a candidate raised into a rejection code and a message a person can act on."""

from __future__ import annotations

import traceback

from engine.gate.correctness import CandidateRejected
from engine.worker.sandbox import SandboxViolation

# Messages are cut to this many characters: enough for Triton's error with its source excerpt.
MESSAGE_LIMIT = 3000
# After these CUDA errors the context is unusable: the worker must exit and be restarted.
FATAL_CUDA_MARKERS = ("CUDA error", "cudaError", "CUDA driver error", "device-side assert")
ILLEGAL_ACCESS_MARKERS = ("illegal memory access", "misaligned address", "illegal address")
OOM_MARKERS = ("out of memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED")


def _candidate_frames(exc: BaseException, candidate_file: str | None) -> str:
    frames = [
        f"  line {f.lineno} in {f.name}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(exc.__traceback__)
        if candidate_file and f.filename == candidate_file
    ]
    return ("\nin the candidate:\n" + "\n".join(frames[-4:])) if frames else ""


def _is_triton_error(exc: BaseException) -> bool:
    return any(c.__module__.startswith("triton") for c in type(exc).__mro__)


def classify(exc: BaseException, phase: str, candidate_file: str | None) -> tuple[str, str, bool]:
    """(reason, message, fatal) for an exception raised in `phase`; fatal means the worker's
    process (its CUDA context) can no longer be trusted."""
    if isinstance(exc, CandidateRejected):
        return exc.reason, exc.message, False
    text = f"{type(exc).__name__}: {exc}"
    where = _candidate_frames(exc, candidate_file)
    if isinstance(exc, SandboxViolation):
        return (
            "forbidden_import",
            f"{exc}; candidates may not start processes, open sockets, "
            "load native code or write files",
            False,
        )
    if isinstance(exc, MemoryError) or any(m in text for m in OOM_MARKERS):
        return "out_of_memory", f"ran out of memory: {text[:MESSAGE_LIMIT]}{where}", False
    if any(m in text for m in ILLEGAL_ACCESS_MARKERS):
        return (
            "illegal_memory_access",
            f"{text[:MESSAGE_LIMIT]}{where}\ncheck the masks of "
            "every tl.load/tl.store and the grid against the tensor sizes",
            True,
        )
    if any(m in text for m in FATAL_CUDA_MARKERS):
        return "launch_error", f"{text[:MESSAGE_LIMIT]}{where}", True
    if _is_triton_error(exc) and phase == "compile":
        return (
            "compile_error",
            f"Triton could not compile the kernel: {text[:MESSAGE_LIMIT]}{where}",
            False,
        )
    if phase == "compile" and isinstance(exc, ImportError | SyntaxError | NameError):
        return "compile_error", f"importing the candidate failed: {text[:MESSAGE_LIMIT]}", False
    return "launch_error", f"a run raised {text[:MESSAGE_LIMIT]}{where}", False
