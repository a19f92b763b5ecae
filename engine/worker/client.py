"""The engine's side of the judge process (`python -m engine.worker`): start it, send a request,
hold each phase to a hard deadline (a backstop: the judge holds its runners to the same ones),
and turn a hang or a crash into a rejection and a restarted judge. A judge that cannot start is
the machine's fault (MACHINE_FAULT), never the candidate's."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace

from engine.jobs import MACHINE_FAULT
from engine.runner.compile_only import TARGET_VARIABLE
from engine.worker.channel import MALFORMED, ReplyChannel
from engine.worker.failures import death_message
from engine.worker.protocol import JudgeRequest, Verdict
from engine.worker.sandbox import worker_environment

# What each phase the worker announces is counted as in the budget ledger.
PHASE_ACTIVITY = {"compile": "compile", "reference": "reference", "run": "check", "time": "time"}
# The engine's deadline for a phase exceeds the judge's own by this much, so that the judge,
# which kills only the runner, is the one that normally acts.
BACKSTOP_S = 30.0
STDERR_DRAIN_S = 2.0  # how long a dead worker's last words may take to be read


@dataclass(frozen=True)
class Timeouts:
    """Hard deadlines in seconds, one per phase."""

    start_s: float = 180.0  # a fresh worker importing torch and triton
    compile_s: float = 180.0  # importing the candidate and its first launch (compiles kernels)
    run_s: float = 120.0  # each further run of the check; the judge's inputs and reference
    time_s: float = 300.0  # timing one size

    def for_phase(self, phase: str) -> float:
        return self.for_judge()[phase]

    def for_judge(self) -> dict:
        return {"compile": self.compile_s, "reference": self.run_s, "run": self.run_s,
                "time": self.time_s}  # fmt: skip


def _failure(reason: str, message: str) -> dict:
    """The verdict on a request whose judge hung, died or did not start."""
    return Verdict(False, reason, message, fatal=True).to_wire()


class WorkerClient:
    """One worker subprocess on one device; `run` never raises for a bad candidate."""

    def __init__(
        self, device: str = "cpu", gpu: int | None = None, timeouts: Timeouts | None = None,
        compile_target: str | None = None,
    ):  # fmt: skip
        self.device = device
        self.gpu = gpu
        self.compile_target = compile_target  # device "compile": the GPU target ("cuda:90:32")
        self.timeouts = timeouts or Timeouts()
        self.proc: subprocess.Popen | None = None
        self.isolation: dict = {}
        self.starts = 0  # worker processes started: every one after the first is a restart
        self._lock = threading.Lock()
        self._starting = False  # start_soon's start is under way

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def _start(self) -> str | None:
        """Start a worker and wait for its `ready`; an error message when it does not come (a
        process the host cannot start, one that dies or hangs before it is ready)."""
        env = worker_environment(self.device)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        if self.device == "compile":  # no GPU is reachable from a compile judge or its runners
            env.update({"CUDA_VISIBLE_DEVICES": "", TARGET_VARIABLE: self.compile_target})
        command = [sys.executable, "-m", "engine.worker", self.device]
        self.starts += 1
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
        except OSError as exc:  # out of memory or processes: the host's, not the candidate's
            self.proc = None
            return f"the judge could not start: {exc}"
        self.channel = ReplyChannel(self.proc.stdout, self.proc.stderr)  # this process's alone
        message = self._next(time.monotonic() + self.timeouts.start_s)
        if not isinstance(message, dict) or message.get("event") != "ready":
            self._kill()
            late = f"not ready within {self.timeouts.start_s:g} s; " if message == "timeout" else ""
            return "the judge could not start: " + late + (self._stderr_tail() or "no output")
        self.isolation = {"sandboxed": message["sandboxed"], "detail": message["isolation"]}
        return None

    def _stderr_tail(self) -> str:
        """The worker's last lines of stderr (those of a dead worker to its very end)."""
        dead = self.proc is None or self.proc.poll() is not None
        return self.channel.tail.text(wait_s=STDERR_DRAIN_S if dead else 0.0)

    def _next(self, deadline: float) -> dict | None | str:
        """The next message; None when the worker died; "timeout" past the deadline. A line
        that is no message goes to the stderr tail."""
        while True:
            try:
                message = self.channel.receive(deadline - time.monotonic())
            except TimeoutError:
                return "timeout"
            if message != MALFORMED:
                return message
            self.channel.tail.lines.append("(an unparsable protocol line)")

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # unflushed bytes to a dead worker
        self.proc = None

    def _death_message(self) -> str:
        return death_message("worker", self.proc.wait(), self._stderr_tail())

    def start_soon(self) -> None:
        """Start the worker (and its runner template) in the background now, so that the first
        request does not wait for their imports."""

        def start() -> None:
            with self._lock:
                try:
                    self._ensure_started()  # where it fails, the first request says why
                finally:
                    self._starting = False

        self._starting = True
        threading.Thread(target=start, daemon=True).start()

    def _ensure_started(self) -> str | None:
        """Start the worker unless it runs; an error message when it does not start."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = None
            return self._start()
        return None

    def run(self, request: JudgeRequest, turn: threading.Lock | None = None) -> dict:
        """Send one request and wait for its result under the phase deadlines. The judge starts
        the candidate's runner first, then works on the GPU holding `turn` (when given), which is
        released with the result. The result has `gpu_seconds` by activity, measured as wall time
        of each phase; the wait for `turn` counts in none. Interrupted mid-request (Ctrl-C, a
        test's timeout), it kills the worker, which would otherwise read the next request as
        the answer to this one's."""
        with self._lock, contextlib.ExitStack() as held:
            try:
                return self._run(
                    request, lambda: held.enter_context(turn or contextlib.nullcontext())
                )
            except BaseException:
                self._kill()
                raise

    def _run(self, request: JudgeRequest, take_turn) -> dict:
        gpu_seconds: dict[str, float] = collections.defaultdict(float)
        problem = self._ensure_started()
        if problem:
            return {**_failure(MACHINE_FAULT, problem), "gpu_seconds": {}}
        self.channel.tail.lines.clear()  # a crash message shows this request's output only
        phase, since = "compile", time.monotonic()
        deadline = since + self.timeouts.for_phase(phase) + BACKSTOP_S
        self._send(replace(request, deadlines=self.timeouts.for_judge()).to_wire())
        while True:
            message = self._next(deadline)
            now = time.monotonic()
            gpu_seconds[PHASE_ACTIVITY[phase]] += now - since
            since = now
            if message == "timeout":
                limit = self.timeouts.for_phase(phase)
                self._kill()
                what = {
                    "compile": "compiling and the first run",
                    "reference": "the judge's inputs and reference",
                    "run": "one run",
                    "time": "timing one size",
                }[phase]
                result = _failure(
                    "timeout",
                    f"{what} took longer than its {limit:g} s deadline (endless loop or a kernel "
                    "that never finishes?); the judge was killed and will be restarted",
                )
                return {**result, "gpu_seconds": dict(gpu_seconds)}
            if message is None:
                result = _failure("crash", self._death_message())
                self._kill()
                return {**result, "gpu_seconds": dict(gpu_seconds)}
            if message.get("event") == "turn":
                take_turn()
                self._send({"go": True})
                since = time.monotonic()
                deadline = since + self.timeouts.for_phase(phase) + BACKSTOP_S
            elif message.get("event") == "phase":
                phase = message["phase"]
                deadline = now + self.timeouts.for_phase(phase) + BACKSTOP_S
            elif message.get("event") == "result":
                result = message["result"]
                if result["fatal"]:
                    self._kill()
                return {**result, "gpu_seconds": dict(gpu_seconds)}

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker is dead: the reader reports it

    def abort(self) -> None:
        """Kill the worker now, even mid-request (which then ends as a crash)."""
        proc = self.proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """End the worker once its request in flight is answered; one that start_soon is still
        starting is killed (a session that cannot start does not wait for its judge)."""
        if self._starting:
            self.abort()
        with self._lock:
            if self.proc is not None:
                try:
                    self.proc.stdin.close()
                    self.proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
                self._kill()
