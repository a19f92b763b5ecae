"""The `kernelbrain` command line for tests. `kernelbrain` calls it in this process
(engine.cli.main): the same exit status and output as a subprocess, without a fresh interpreter
importing torch (a second or two a call on two cores). `kernelbrain_process` starts the real
process, for what only a process shows: signals, kill -9, what it imports, its environment at
start (the sandbox choice is read once a process), a terminal or none."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from engine.cli import main

CLI = [sys.executable, "-m", "engine.cli"]
ROOT = Path(__file__).resolve().parent.parent


def kernelbrain(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """`kernelbrain ARGS` in this process, with `env` added to the environment for the call
    (os.environ is restored afterwards, as a subprocess's changes vanish with it)."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
                status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["kernelbrain", *argv], status, out.getvalue(),
                                       err.getvalue())  # fmt: skip


def kernelbrain_process(*args, env: dict | None = None, timeout: float = 240,
                        **popen) -> subprocess.CompletedProcess:  # fmt: skip
    """`kernelbrain ARGS` in a process of its own, with `env` added to this one's environment."""
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, **(env or {})}, **popen)  # fmt: skip
