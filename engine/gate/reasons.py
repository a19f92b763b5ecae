"""Stable rejection codes of the policy gate, each with the one line that explains it."""

from __future__ import annotations

from dataclasses import dataclass

REASONS = {
    "syntax_error": "the source does not parse as Python",
    "missing_modelnew": "the module defines no class ModelNew",
    "signature_mismatch": "ModelNew's constructor or forward parameters differ from Model's",
    "no_triton_kernel": "no @triton.jit kernel is launched, so the work is not done in Triton",
    "calls_replaced_operator": "it calls the PyTorch operator that it is meant to replace",
    "forbidden_import": "it reaches processes, the shell, the network, raw memory or dynamic code",
    "native_code": "it builds or loads native code (Triton's build helpers, ctypes, a library)",
    "compile_error": "importing the module or compiling its first kernel failed",
    "launch_error": "a run raised an exception",
    "timeout": "compiling or running took longer than the hard deadline",
    "crash": "its runner died (signal or abort), again in a fresh runner while a known-good "
    "request passed",
    "out_of_memory": "a run ran out of memory",
    "machine_fault": "not the candidate's: the machine failed (a judge or runner that cannot "
    "start, the judge's memory, a lost GPU); retried, then the search pauses, never rejects",
    "reference_failed": "not the candidate's: the problem's own Model failed on its inputs; the "
    "search pauses, never rejects",
    "illegal_memory_access": "a kernel accessed memory it does not own (CUDA error)",
    "wrong_output": "the output differs from the float64 reference beyond the tolerance",
    "nan_output": "the output holds NaN or Inf",
    "unwritten_output": "part of the output was never written (it kept the NaN poison)",
    "constant_output": "every element of the output is the same value (for example all zeros)",
    "mutates_input": "a run changed one of its input tensors",
    "stale_output": "the output is stale: right at first, wrong after timing or on later calls",
    "bad_output_type": "forward returned something other than tensors of the reference's dtype",
    "wrong_shape": "the output's shape differs from the reference's",
    "torch_compute": "forward computes with torch operators instead of Triton kernels",
    "timing_tampered": "the runner's timings disagree with the judge's own clock beyond noise",
    "protocol_violation": "the runner sent something that is not a valid reply",
    "runner_tampered": "it changed the runner's process-wide state (torch's settings, the "
    "environment, installed functions), which the next candidate would inherit",
}


@dataclass(frozen=True)
class Rejection:
    """Why a candidate fails the gate: a code from REASONS and a message a person can act on."""

    reason: str
    message: str

    def __post_init__(self):
        if self.reason not in REASONS:
            raise ValueError(f"unknown rejection code {self.reason!r}")
