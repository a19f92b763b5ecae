"""A real engine on a test's session: resumed by `kernelbrain resume --headless` in its own
process, paused before its first step so the published state stands still."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager

from engine.session_files import SessionPaths, read_snapshot, send_command, start_detached_engine

MORE_EVALS = "+1000evals"  # enough that an unpaused engine goes on for the length of a test
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def command_record(paths: SessionPaths, command_id: str) -> dict | None:
    """The engine's record of a command in snapshot.json `commands`, once it has applied it."""
    commands = (read_snapshot(paths) or {}).get("commands") or []
    return next((c for c in commands if c["id"] == command_id), None)


class LiveEngine:
    def __init__(self, paths: SessionPaths, process: subprocess.Popen) -> None:
        self.paths = paths
        self.process = process

    @classmethod
    def start_paused(cls, paths: SessionPaths) -> LiveEngine:
        """Resume the session with MORE_EVALS of budget and a pause waiting in the inbox; return
        once the engine has applied both."""
        send_command(paths, "budget", amount=MORE_EVALS)
        pause = send_command(paths, "pause")
        engine = cls(paths, start_detached_engine(paths))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (
            command_record(paths, pause["id"]) and read_snapshot(paths)["state"] == "paused"
        ):
            if engine.process.poll() is not None or time.monotonic() > deadline:
                engine.stop()
                raise AssertionError(f"the engine did not pause:\n{paths.log.read_text()}")
            time.sleep(0.05)
        return engine

    @contextmanager
    def frozen(self):
        """Stop the engine process (SIGSTOP) for the block: what a client sends meanwhile stays
        in the inbox, so the client's "pending" state can be seen before the engine answers."""
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Send `stop` and wait for the engine to exit (kill it if it does not)."""
        if self.process.poll() is None:
            send_command(self.paths, "stop")
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                log = self.paths.log.read_text()
                raise AssertionError(f"the engine ignored stop:\n{log}") from None
