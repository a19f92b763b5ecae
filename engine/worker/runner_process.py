"""The judge's handle on one runner: a sandboxed process that holds one candidate. Replies are
data (checked by the caller), each awaited under a deadline; the process dies with the judge."""

from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

from engine.worker.failures import death_message
from engine.worker.sandbox import RUNNER_PACKAGE, runner_command

STDERR_TAIL_LINES = 40
# A reply line longer than this is not a reply: the runner is lying or broken.
REPLY_LIMIT = 1 << 20
EXCHANGE_PARENT = "/dev/shm" if os.path.isdir("/dev/shm") else None


class RunnerFailed(Exception):
    """The runner died, hung past its deadline, or broke the protocol; `kind` says which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "crash" | "timeout" | "protocol"
        self.message = message


class RunnerProcess:
    """Start at once (importing torch takes seconds), use for one candidate, then `close`. A
    runner stays in the judge's process group (the engine's kill of the judge reaches it), and
    `LIVE` lets the judge end every runner when the engine is gone."""

    LIVE: set[RunnerProcess] = set()

    def __init__(self, device: str):
        self.device = device
        self.exchange = tempfile.mkdtemp(prefix="kb-exchange-", dir=EXCHANGE_PARENT)
        os.symlink(RUNNER_PACKAGE, os.path.join(self.exchange, "kbrunner"))
        launch = runner_command(device, self.exchange, plain_root=self.exchange)
        self.sandboxed = launch.sandboxed
        self.proc = subprocess.Popen(
            launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=launch.env,
            pass_fds=launch.pass_fds,
            preexec_fn=launch.preexec_fn,
            text=True,
            bufsize=1,
        )
        for fd in launch.pass_fds:
            os.close(fd)
        self._replies: queue.Queue = queue.Queue()
        self._stderr: collections.deque = collections.deque(maxlen=STDERR_TAIL_LINES)
        threading.Thread(target=self._read_replies, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.ready: dict | None = None
        RunnerProcess.LIVE.add(self)

    def _read_replies(self) -> None:
        for line in self.proc.stdout:
            self._replies.put(line[:REPLY_LIMIT])
        self._replies.put(None)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip()[:500])

    def stderr_tail(self) -> str:
        return "\n".join(list(self._stderr)[-12:])

    def _reply(self, deadline_s: float, what: str) -> dict:
        try:
            line = self._replies.get(timeout=deadline_s)
        except queue.Empty:
            self.close()
            raise RunnerFailed(
                "timeout",
                f"{what} took longer than its {deadline_s:g} s deadline "
                "(an endless loop or a kernel that never ends?)",
            ) from None
        if line is None:
            raise RunnerFailed("crash", self._death_message())
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            self.close()
            raise RunnerFailed(
                "protocol",
                "the runner answered with something that is not a "
                "reply (did the candidate write to the runner's channel?)",
            )
        return reply

    def wait_ready(self, deadline_s: float) -> dict:
        if self.ready is None:
            self.ready = self._reply(deadline_s, "starting the runner")
        return self.ready

    def request(self, message: dict, deadline_s: float, what: str) -> dict:
        """Send one command; its reply (which may be {"error": ...}) within `deadline_s`."""
        self.wait_ready(deadline_s)
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # dead: the reader reports it
        return self._reply(deadline_s, what)

    def timed_request(self, message: dict, deadline_s: float, what: str) -> tuple[dict, float]:
        """`request`, and the judge's own clock around it in milliseconds."""
        start = time.perf_counter()
        reply = self.request(message, deadline_s, what)
        return reply, (time.perf_counter() - start) * 1e3

    def _death_message(self) -> str:
        code = self.proc.wait()
        if self.sandboxed and code > 128:  # bubblewrap exits 128 + the signal its child died of
            code = 128 - code
        return death_message("runner", code, self.stderr_tail())

    def close(self, keep: str | None = None, into: str | None = None) -> None:
        """Kill the runner (its whole sandbox) and remove the exchange folder, after moving the
        folder `keep` (regular files and folders only) to `into`."""
        if self.proc.poll() is None:
            self.proc.kill()  # bubblewrap: its whole sandbox dies with it
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if keep and into and os.path.isdir(keep):
            shutil.rmtree(into, ignore_errors=True)
            shutil.copytree(keep, into, symlinks=True, ignore=_links)
        shutil.rmtree(self.exchange, ignore_errors=True)
        RunnerProcess.LIVE.discard(self)


def _links(folder: str, names: list[str]) -> list[str]:
    """What copytree leaves out: links, which could point anywhere on the judge's machine."""
    return [n for n in names if os.path.islink(os.path.join(folder, n))]
