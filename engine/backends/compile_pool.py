"""Compile workers beside the GPU: while one candidate is timed, the next ones compile.

Each worker is a judge process of device "compile" (engine.worker.precompile): candidates compile
there in sandboxed runners without a GPU, into their own Triton cache, which their timing runner
is then seeded with. Jobs run in the order they are submitted (the engine submits its queue's
head first); `result` waits for one, submitting it first where nobody has.
"""

from __future__ import annotations

import queue
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor

from engine import settings
from engine.worker.client import Timeouts, WorkerClient
from engine.worker.precompile import outcome
from engine.worker.protocol import JudgeRequest

# One compile worker by default. On the H200 box (16 cores) a warm worker compiled a softmax
# candidate at its three sizes in 0.2 s and the GPU's evaluation of it took 2 s, so one keeps
# up; four workers starting at once (each a judge and a template importing torch) slowed a
# 10 GPU-s softmax search from 53 s to 71 s of wall time (docs/results/issue10/compile_ahead).
# `KERNELBRAIN_COMPILE_WORKERS=N` sets how many run beside the GPU; 0: none.
WORKERS_SWITCH = settings.COMPILE_WORKERS
DEFAULT_WORKERS = settings.SETTINGS[WORKERS_SWITCH].default  # 1


def workers_wanted() -> int:
    """The compile workers KERNELBRAIN_COMPILE_WORKERS asks for, else DEFAULT_WORKERS."""
    return settings.value(WORKERS_SWITCH)


def gpu_target(gpu: int) -> str | None:
    """GPU `gpu`'s compile target, "cuda:<capability>:<warp size>", read from nvidia-smi (which
    needs no CUDA context); None where it cannot be read."""
    query = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i", str(gpu)]
    try:
        found = subprocess.run(query, capture_output=True, text=True, timeout=60)
        major, minor = found.stdout.strip().split(".")
        return f"cuda:{int(major) * 10 + int(minor)}:32"
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


class CompilePool:
    def __init__(self, target: str, workers: int, timeouts: Timeouts | None = None):
        self.target = target
        self.clients = [WorkerClient("compile", None, timeouts, target) for _ in range(workers)]
        self._idle: queue.Queue = queue.Queue()
        for client in self.clients:
            client.start_soon()
            self._idle.put(client)
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="kb-compile")
        self._jobs: dict[str, Future] = {}

    def submitted(self, key: str) -> bool:
        return key in self._jobs

    def submit(self, key: str, request: JudgeRequest) -> None:
        """Compile `request` (a judge request of device "compile") unless `key` was submitted."""
        if key not in self._jobs:
            self._jobs[key] = self._executor.submit(self._compile, request)

    def result(self, key: str, request: JudgeRequest) -> dict:
        """The outcome of `key`'s compile (engine.worker.precompile.outcome), once it is done,
        with `gpu_seconds` {"compile": seconds it took in its worker}."""
        self.submit(key, request)
        return self._jobs[key].result()

    def _compile(self, request: JudgeRequest) -> dict:
        client = self._idle.get()
        try:
            found = client.run(request)
        finally:
            self._idle.put(client)
        if "status" not in found:  # the worker itself died, or hung past the engine's backstop
            found = {**outcome("skipped", message=found["message"]), **found}
        return found

    def close(self) -> None:
        """Drop what has not started; end the workers, mid-compile too."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        for client in self.clients:
            client.abort()
        self._executor.shutdown(wait=True)
        for client in self.clients:
            client.close()
