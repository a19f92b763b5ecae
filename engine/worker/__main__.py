"""`python -m engine.worker`: the judge. One JSON request per line on stdin, one result per line.

The judge never runs candidate code: each request gets a fresh sandboxed runner (engine.runner)
from a pool that keeps the next one starting while this one works. The protocol travels on a
private copy of the original stdout; fd 1 then points at stderr. The judge, and with it every
runner, ends when the engine does, however the engine ends.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from engine.worker.judge import evaluate
from engine.worker.runner_process import RunnerProcess
from engine.worker.sandbox import isolation

PARENT_POLL_S = 0.5


class RunnerPool:
    """One runner per candidate; the next is started as soon as one is taken, so that its
    seconds of importing torch overlap the evaluation in progress."""

    def __init__(self):
        self.spare: RunnerProcess | None = None

    def take(self, device: str) -> RunnerProcess:
        runner = self.spare
        if runner is None or runner.device != device or runner.proc.poll() is not None:
            if runner is not None:
                runner.close()
            runner = RunnerProcess(device)
        self.spare = RunnerProcess(device)
        return runner

    def close(self) -> None:
        if self.spare is not None:
            self.spare.close()


def exit_with_parent() -> None:
    """End the judge and every runner once the engine that started it is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        for runner in list(RunnerProcess.LIVE):
            runner.proc.kill()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    pool = RunnerPool()
    exit_with_parent()
    box = isolation()
    send(
        {"event": "ready", "pid": os.getpid(), "sandboxed": box.sandboxed, "isolation": box.detail}
    )
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            runner = pool.take(request["device"])
            result = evaluate(
                request, lambda phase: send({"event": "phase", "phase": phase}), runner
            )
            send({"event": "result", "result": result})
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
