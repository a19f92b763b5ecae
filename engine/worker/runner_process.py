"""The judge's handle on one runner: a process forked from the sandboxed template that holds one
candidate. Replies are data (checked by the caller), each awaited under a deadline."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from typing import Protocol

from engine.worker.channel import MALFORMED, ReplyChannel
from engine.worker.failures import death_message
from engine.worker.sandbox import TRITON_CACHE_NAME

STDERR_DRAIN_S = 2.0  # how long a dead runner's last words may take to be read


class Template(Protocol):
    """What a runner needs of the template it was forked from (engine.worker.template)."""

    device: str
    exchange: str
    sandboxed: bool
    share_works: bool

    def end(self, pid: int) -> int: ...


class RunnerFailed(Exception):
    """The runner died, hung past its deadline, or broke the protocol; `kind` says which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "crash" | "timeout" | "protocol"
        self.message = message


class RunnerProcess:
    """One candidate's runner: talk to it with `request`, then `close` it (its process group is
    killed and reaped by the template)."""

    def __init__(self, template: Template, pid: int, stdin: int, stdout: int, stderr: int,
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
        self.channel = ReplyChannel(self.stdout, self.stderr)
        self.ready: dict | None = None
        self.owner = ""  # whose requests it serves (engine.worker.runner_pool)
        self.evaluations = 1  # requests it served, this one included
        self.calibration: tuple | None = None  # measured while no candidate code was in it

    @property
    def triton_cache(self) -> str:
        return os.path.join(self.exchange, TRITON_CACHE_NAME)

    def stderr_tail(self) -> str:
        return self.channel.tail.text()

    def _reply(self, deadline_s: float, what: str) -> dict:
        try:
            reply = self.channel.receive(deadline_s)
        except TimeoutError:
            self.close()
            raise RunnerFailed(
                "timeout",
                f"{what} took longer than its {deadline_s:g} s deadline "
                "(an endless loop or a kernel that never ends?)",
            ) from None
        if reply is None:
            self.close()
            tail = self.channel.tail.text(wait_s=STDERR_DRAIN_S)  # its last words
            raise RunnerFailed("crash", death_message("runner", self.exit_code, tail))
        if reply == MALFORMED:
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
