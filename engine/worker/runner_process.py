"""The judge's handle on one runner: a process forked from the sandboxed template that holds one
candidate. Replies are data (checked by the caller), each awaited under a deadline."""

from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import socket
import threading
import time
from typing import TYPE_CHECKING

from engine.worker.failures import death_message
from engine.worker.sandbox import TRITON_CACHE_NAME

if TYPE_CHECKING:
    from engine.worker.template import RunnerTemplate

STDERR_TAIL_LINES = 40
# A reply line longer than this is not a reply: the runner is lying or broken.
REPLY_LIMIT = 1 << 20


class RunnerFailed(Exception):
    """The runner died, hung past its deadline, or broke the protocol; `kind` says which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "crash" | "timeout" | "protocol"
        self.message = message


def collect_tail(stream, tail: collections.deque) -> None:
    """Keep the last lines of `stream` until its end, then close it."""
    for line in stream:
        tail.append(line.rstrip()[:500])
    stream.close()


class RunnerProcess:
    """One candidate's runner: talk to it with `request`, then `close` it (its process group is
    killed and reaped by the template)."""

    def __init__(self, template: RunnerTemplate, pid: int, stdin: int, stdout: int, stderr: int,
                 share: socket.socket | None = None):  # fmt: skip
        self.template = template
        self.share = share  # the socket GPU memory crosses on (cuda)
        self.pid = pid
        self.device = template.device
        self.exchange = template.exchange
        self.sandboxed = template.sandboxed
        self.stdin = os.fdopen(stdin, "w", buffering=1)
        self.stdout = os.fdopen(stdout, "r")
        self.stderr = os.fdopen(stderr, "r", errors="replace")
        self.exit_code: int | None = None
        self._replies: queue.Queue = queue.Queue()
        self._stderr: collections.deque = collections.deque(maxlen=STDERR_TAIL_LINES)
        threading.Thread(target=self._read_replies, daemon=True).start()
        self._stderr_reader = threading.Thread(
            target=collect_tail, args=(self.stderr, self._stderr), daemon=True
        )
        self._stderr_reader.start()
        self.ready: dict | None = None
        self.owner = ""  # whose requests it serves (engine.worker.runner_pool)
        self.evaluations = 1  # requests it served, this one included
        self.calibration: tuple | None = None  # measured while no candidate code was in it

    @property
    def triton_cache(self) -> str:
        return os.path.join(self.exchange, TRITON_CACHE_NAME)

    def _read_replies(self) -> None:
        try:
            for line in self.stdout:
                self._replies.put(line[:REPLY_LIMIT])
        except UnicodeDecodeError:
            pass  # bytes that are no reply: the runner is done
        self.stdout.close()
        self._replies.put(None)

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
            self.close()
            self._stderr_reader.join(timeout=2.0)  # its last words
            raise RunnerFailed("crash", death_message("runner", self.exit_code, self.stderr_tail()))
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
            self.stdin.write(json.dumps(message) + "\n")
            self.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # dead: the reader reports it
        return self._reply(deadline_s, what)

    def timed_request(self, message: dict, deadline_s: float, what: str) -> tuple[dict, float]:
        """`request`, and the judge's own clock around it in milliseconds."""
        start = time.perf_counter()
        reply = self.request(message, deadline_s, what)
        return reply, (time.perf_counter() - start) * 1e3

    def close(self, keep: str | None = None, into: str | None = None) -> None:
        """Kill the runner (its whole process group) and reap it, after moving the folder `keep`
        (regular files and folders only) to `into`. Idempotent."""
        if self.exit_code is None:
            self.exit_code = self.template.end(self.pid)  # the readers see the end of its output
            try:
                self.stdin.close()
            except OSError:
                pass
            if self.share is not None:
                self.share.close()
        if keep and into and os.path.isdir(keep):
            shutil.rmtree(into, ignore_errors=True)
            shutil.copytree(keep, into, symlinks=True, ignore=links_in)


def links_in(folder: str, names: list[str]) -> list[str]:
    """What copytree leaves out: links, which could point anywhere on the judge's machine."""
    return [n for n in names if os.path.islink(os.path.join(folder, n))]
