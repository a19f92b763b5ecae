"""`python -m kbrunner` (inside the sandbox): the template that every runner is forked from.

Importing torch and triton and warming up take seconds; a fork takes milliseconds, so the template
pays them once and forks runners from it (the judge lends a runner again only to its owner's
next request: engine.worker.runner_pool). The template runs no candidate code, and no runner can
reach it: it is not dumpable (no ptrace, no /proc/PID/mem), a runner's seccomp filter lets it
signal only itself, and a runner closes every descriptor of the template's before it reads a
command.

Commands arrive on the control socket (fd KB_CONTROL_FD, a Unix SEQPACKET socket), one JSON object
per message:
  {"op": "fork"} with the runner's stdin, stdout and stderr (and on cuda its share socket)
      -> {"pid": N}
  {"op": "end", "pid": N} -> the runner's process group killed and reaped -> {"exit_code": C}
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import json
import os
import signal
import socket
import sys
import traceback

from .seccomp import candidate_program, install

MESSAGE_LIMIT = 1 << 16
# Where a runner's descriptors are moved before they take their places 0..3.
FIRST_HIGH_FD, SHARE_FD = 64, 3
_PR_SET_DUMPABLE = 4


def become_runner(fds: list[int], device: str, exchange: str) -> int:
    """In the forked child: a session of its own, the given descriptors as 0, 1, 2 (and 3, the
    share socket on cuda) and no other, its seccomp filter, then the runner's loop."""
    from .serve import serve  # imported by the template already

    os.setsid()  # its process group is what `end` kills
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, FIRST_HIGH_FD) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(fds), os.sysconf("SC_OPEN_MAX"))
    program = candidate_program(os.getpid(), allow_processes=device != "cpu")
    if program is not None:
        install(program)
    return serve(device, exchange, SHARE_FD if len(fds) > SHARE_FD else None)


def end(pid: int) -> int:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone: only its zombie is left to reap
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return -signal.SIGKILL  # not a runner of this template (or reaped already)


def main() -> int:
    control = socket.socket(fileno=int(os.environ["KB_CONTROL_FD"]))
    device, exchange = os.environ["KB_DEVICE"], os.environ["KB_EXCHANGE"]
    import torch  # noqa: F401  (imported before the judge is told the template is ready)

    from .serve import serve  # noqa: F401  (everything a runner imports, imported once here)
    from .warmup import warm_up_template

    warm_up_template(device)
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    # What is imported now lives as long as the process: out of the cyclic collector's sight, a
    # runner's collections (before timing, at a reset) scan only what came after.
    gc.freeze()

    def reply(message: dict) -> None:
        control.send(json.dumps(message).encode())

    reply({"ready": True})
    while True:
        data, fds, _, _ = socket.recv_fds(control, MESSAGE_LIMIT, SHARE_FD + 1)
        if not data:
            return 0  # the judge is gone
        command = json.loads(data)
        if command["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                control.detach()
                code = 1
                try:
                    code = become_runner(fds, device, exchange)
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            reply({"pid": pid})
        elif command["op"] == "end":
            reply({"exit_code": end(command["pid"])})


if __name__ == "__main__":
    sys.exit(main())
