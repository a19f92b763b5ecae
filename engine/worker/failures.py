"""Turn what a runner reported (an error description, a death, a hang) into a rejection code and
a message a person can act on. Every text that came from the runner is sanitised here: it is the
candidate's to write, and it travels into sessions, events and LLM prompts."""

from __future__ import annotations

import re
import signal

# Characters of a message: enough for Triton's error with its source excerpt.
MESSAGE_LIMIT = 3000
OOM_MARKERS = ("out of memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED")
ILLEGAL_ACCESS_MARKERS = ("illegal memory access", "misaligned address", "illegal address")
FATAL_CUDA_MARKERS = ("CUDA error", "cudaError", "CUDA driver error", "device-side assert")
# A GPU that is gone (fallen off the bus, reset, taken by another process in exclusive mode).
LOST_DEVICE_MARKERS = (
    "no CUDA-capable device",
    "busy or unavailable",
    "GPU is lost",
    "fallen off the bus",
    "CUDA driver initialization failed",
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u200b-\u200f\u2028-\u202e\ufeff]")


def sanitize(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """Printable text of at most `limit` characters: control and invisible characters dropped."""
    clean = _CONTROL.sub("", str(text))
    return clean if len(clean) <= limit else clean[: limit - 14] + " [...truncated]"


def classify_reply(reply: dict, phase: str) -> tuple[str, str] | None:
    """(reason, message) for a reply that rejects the candidate (native code the runner refused,
    even where the candidate caught the refusal; an error), or None."""
    refused = reply.get("native_code")
    if refused:
        what = sanitize(", ".join(map(str, refused)) if isinstance(refused, list) else refused, 600)
        return "native_code", (
            f"the runner refused native code the candidate reached: {what}. Candidates compute in "
            "@triton.jit kernels that Triton compiles and launches; they build and load nothing"
        )
    return classify_error(reply["error"], phase) if "error" in reply else None


def classify_error(error: dict, phase: str) -> tuple[str, str]:
    """(reason, message) for an exception the runner described in `phase`."""
    if not isinstance(error, dict):
        return "protocol_violation", "the runner's error report is malformed"
    text = sanitize(f"{error.get('type', '?')}: {error.get('message', '')}")
    frames = error.get("frames") if isinstance(error.get("frames"), list) else []
    where = sanitize("\nin the candidate:\n" + "\n".join(map(str, frames[-4:]))) if frames else ""
    if error.get("type") == "MemoryError" or any(m in text for m in OOM_MARKERS):
        return "out_of_memory", f"ran out of memory: {text}{where}"
    if any(m in text for m in ILLEGAL_ACCESS_MARKERS):
        return "illegal_memory_access", (
            f"{text}{where}\ncheck the masks of every tl.load/tl.store and the grid against the "
            "tensor sizes"
        )
    if any(m in text for m in LOST_DEVICE_MARKERS):  # a crash: a fresh runner tells whose
        return "crash", f"the runner lost its GPU: {text}{where}"
    if any(m in text for m in FATAL_CUDA_MARKERS):
        return "launch_error", f"{text}{where}"
    if error.get("type") == "NativeCodeRefused":
        return "native_code", f"{text}{where}"
    if phase == "compile" and error.get("triton") is True:
        return "compile_error", f"Triton could not compile the kernel: {text}{where}"
    if phase == "compile" and error.get("type") in (
        "ImportError",
        "SyntaxError",
        "NameError",
        "ModuleNotFoundError",
        "AttributeError",
    ):
        return "compile_error", f"importing the candidate failed: {text}{where}"
    if error.get("type") == "PermissionError" or "Permission denied" in text:
        return "forbidden_import", (
            f"{text}{where}\nthe sandbox refused it: candidates may not start processes, open "
            "sockets or write outside their temporary folder"
        )
    return "launch_error", f"a run raised {text}{where}"


def judge_ran_out_of_memory(exc: BaseException) -> bool:
    """Whether an exception raised in the judge's own work is a failed allocation (on cuda
    torch's OutOfMemoryError or the driver's, as CudaShareError names it; on cpu the
    allocator's, or Python's MemoryError)."""
    return isinstance(exc, MemoryError) or any(m in str(exc) for m in OOM_MARKERS)


def judge_machine_fault(exc: BaseException) -> str | None:
    """What failed, where an exception raised in the judge's own work (never the candidate's)
    is a fault of the machine: its memory ran out or its GPU was lost; None for any other."""
    text = sanitize(exc)
    if judge_ran_out_of_memory(exc):
        return f"the judge could not allocate its own buffers: {text or 'MemoryError'}"
    if any(m in text for m in LOST_DEVICE_MARKERS):
        return f"the judge lost its GPU: {text}"
    return None


def classify_death(kind: str, message: str) -> tuple[str, str]:
    """(reason, message) for a runner that died ("crash"), hung ("timeout") or broke the
    protocol ("protocol"); its last output (sanitised) says why."""
    text = sanitize(message)
    if kind == "timeout":
        return "timeout", f"{text}; the runner was killed"
    if kind == "protocol":
        return "protocol_violation", text
    if any(m in text for m in ILLEGAL_ACCESS_MARKERS):
        return "illegal_memory_access", text
    if any(m in text for m in OOM_MARKERS):
        return "out_of_memory", text
    return "crash", text


SIGNAL_WORDS = {
    "SIGSEGV": "a segmentation fault (a kernel or library read invalid memory)",
    "SIGKILL": "SIGKILL (killed from outside, often by the out-of-memory killer)",
    "SIGABRT": "an abort",
    "SIGBUS": "a bus error (invalid memory access)",
}


def death_message(who: str, code: int, tail: str) -> str:
    """Why process `who` ended, from its exit status (negative: a signal) and its last output."""
    if code < 0:
        name = signal.Signals(-code).name
        cause = f"the {who} died of {SIGNAL_WORDS.get(name, name)}"
    else:
        cause = f"the {who} exited with status {code}"
    return cause + (f"; its last output:\n{tail}" if tail else "")
