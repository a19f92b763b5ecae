"""`python -m engine.worker [DEVICE]`: the judge. One JSON request per line on stdin, one result
per line; the runner template of DEVICE, where it is given, starts at once. An evaluation asks
for the GPU ({"event": "turn"}) once its runner has started, and waits for {"go": true}: other
processes' work on the GPU ends before this one's begins, and its runner starts beside theirs.

The judge never runs candidate code: each request gets a runner forked from the device's sandboxed
template (engine.runner), which has imported torch and triton once, or the runner its owner's last
request left clean (engine.worker.runner_pool); a judge of device "compile" only compiles
candidates ahead of their timing, in fresh runners without a GPU. The protocol
travels on a private copy of the original stdout; fd 1 then points at stderr. The judge, and
with it every runner, ends when the engine does, however the engine ends.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time

from engine.worker.protocol import JudgeRequest
from engine.worker.runner_pool import RunnerPool
from engine.worker.sandbox import isolation
from engine.worker.template import RunnerTemplate

PARENT_POLL_S = 0.5


def exit_with_parent() -> None:
    """End the judge and every runner once the engine that started it is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        for template in list(RunnerTemplate.LIVE):
            template.kill()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def serve(send, pools: dict[str, RunnerPool]) -> None:
    """Answer requests until the engine closes stdin."""
    from engine.worker.judge import evaluate
    from engine.worker.precompile import precompile
    from engine.worker.reference_bank import ReferenceBank

    banks: dict[str, ReferenceBank | None] = {}

    def take_turn() -> None:
        send({"event": "turn"})
        line = sys.stdin.readline()
        if not line or not json.loads(line).get("go"):
            raise SystemExit("the engine stopped before this request's turn on the GPU")

    gc.freeze()  # torch and the judge's modules: no collection (one a timed size) scans them
    box = isolation()
    send(
        {"event": "ready", "pid": os.getpid(), "sandboxed": box.sandboxed, "isolation": box.detail}
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        request = JudgeRequest.from_wire(json.loads(line))
        device = request.device
        if device not in pools:
            pools[device] = RunnerPool(RunnerTemplate(device))
        if device not in banks:
            banks[device] = ReferenceBank(device) if device != "compile" else None
        if device == "compile":  # compiling ahead (engine.worker.precompile)
            result = precompile(request, pools[device].template)
        else:
            result = evaluate(
                request, lambda phase: send({"event": "phase", "phase": phase}), take_turn,
                pools[device], banks[device],
            ).to_wire()  # fmt: skip
        send({"event": "result", "result": result})


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    pools: dict[str, RunnerPool] = {}
    exit_with_parent()
    if len(sys.argv) > 1:  # the device it will serve: its template starts before torch loads here
        pools[sys.argv[1]] = RunnerPool(RunnerTemplate(sys.argv[1]))
    try:
        serve(send, pools)
    finally:
        for pool in pools.values():
            pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
