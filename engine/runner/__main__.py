"""`python -m kbrunner` (inside the sandbox): one candidate, one JSON command per line on stdin.

The replies travel on a private copy of the original stdout; fd 1 then points at stderr, so what
a candidate prints cannot be mistaken for a reply (and a forged reply is only ever data).
"""

from __future__ import annotations

import json
import os
import sys


def network_interfaces() -> list[str]:
    """Interface names of this network namespace, read from /proc (no socket needed)."""
    with open("/proc/net/dev") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


def main() -> int:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch  # noqa: F401  (imported before the judge is told the runner is ready)

    from .session import RunnerSession
    from .warmup import warm_up

    device, exchange = os.environ["KB_DEVICE"], os.environ["KB_EXCHANGE"]
    session = RunnerSession(device, exchange)
    warm_up(device)
    interfaces = network_interfaces()
    replies.write(json.dumps({"ready": True, "pid": os.getpid(), "interfaces": interfaces}) + "\n")
    for line in sys.stdin:
        if line.strip():
            replies.write(json.dumps(session.handle(json.loads(line))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
