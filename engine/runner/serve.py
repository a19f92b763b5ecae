"""One runner: a process forked from the template, serving one JSON command per line on stdin, for
one candidate at a time (a reset forgets it before the next).

The replies travel on a private copy of the original stdout; fd 1 then points at stderr, so what
a candidate prints cannot be mistaken for a reply (and a forged reply is only ever data).
"""

from __future__ import annotations

import json
import os
import sys

from .session import RunnerSession
from .warmup import warm_up_runner


def network_interfaces() -> list[str]:
    """Interface names of this network namespace, read from /proc (no socket needed)."""
    with open("/proc/net/dev") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


def serve(device: str, exchange: str, share_fd: int | None = None) -> int:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    session = RunnerSession(device, exchange, share_fd)
    warm_up_runner(device)
    interfaces = network_interfaces()
    replies.write(json.dumps({"ready": True, "pid": os.getpid(), "interfaces": interfaces}) + "\n")
    for line in sys.stdin:
        if line.strip():
            replies.write(json.dumps(session.handle(json.loads(line))) + "\n")
    return 0
