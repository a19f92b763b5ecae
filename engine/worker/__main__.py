"""`python -m engine.worker`: evaluate candidates, one JSON request per line on stdin.

The protocol travels on a private copy of the original stdout; fd 1 then points at stderr, so
whatever a candidate prints cannot corrupt it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from engine.worker.runner import evaluate
from engine.worker.sandbox import install_audit_hook, network_interfaces


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    candidate_dir = tempfile.mkdtemp(prefix="kb-candidates-")
    interfaces = network_interfaces()
    violations: list[str] = []
    install_audit_hook(candidate_dir, violations)
    send({"event": "ready", "pid": os.getpid(), "interfaces": interfaces, "audit_hook": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        result = evaluate(request, lambda phase: send({"event": "phase", "phase": phase}),
                          candidate_dir)  # fmt: skip
        send({"event": "result", "result": result})
        if result["fatal"]:
            return 3  # the CUDA context is unusable: let the engine start a fresh worker
    return 0


if __name__ == "__main__":
    sys.exit(main())
