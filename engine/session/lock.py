"""One engine per session: an exclusive flock on `engine.lock`, released by the kernel when the
engine dies, so a lock left by a killed engine is stale by construction and simply taken over."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time

from engine.errors import KernelBrainError
from engine.session_files import SessionPaths

# The lock's text is rewritten in place at each heartbeat, padded to one length: a reader never
# finds it empty or half written (truncating first let `ls` and `show` call a running session
# interrupted, between the truncate and the write).
LOCK_TEXT_BYTES = 512


class SessionBusy(KernelBrainError):
    pass


class EngineLock:
    def __init__(self, paths: SessionPaths):
        self.paths = paths
        self.fd: int | None = None
        self.started_at = time.time()
        self.was_stale = False  # the lock of a killed engine was taken over

    def acquire(self) -> bool:
        """Take the lock; returns True when a stale lock of a killed engine was taken over."""
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self._read() or {}
            raise SessionBusy(
                f"session {self.paths.name} is already run by engine pid "
                f"{holder.get('pid', '?')} on {holder.get('host', '?')}: attach to it "
                f"(kernelbrain attach {self.paths.name}) or stop it first "
                f"(kernelbrain stop {self.paths.name})"
            ) from None
        self.was_stale = bool(self._read())
        self.fd = fd
        self.heartbeat()
        return self.was_stale

    def _read(self) -> dict | None:
        try:
            text = self.paths.lock.read_text()
            return json.loads(text) if text.strip() else None
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def heartbeat(self) -> None:
        data = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": self.started_at,
            "heartbeat": time.time(),
        }
        os.pwrite(self.fd, json.dumps(data).ljust(LOCK_TEXT_BYTES).encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
