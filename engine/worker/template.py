"""The judge's handle on one device's runner template: a sandboxed process that has imported torch
and triton and forks a fresh runner when one is asked for (engine/runner/__main__.py).

Runners follow one another, never overlap: before each fork the judge empties every folder the box
can write (the exchange folder, its /tmp and /dev/shm) after the last runner is dead, so nothing a
candidate leaves behind reaches the next. The Triton cache of the first runner, copied when it is
ready (before anything of a candidate's is in it: its own cache is added after), seeds every later
runner's, so that on cuda Triton's driver utilities and the warm-up kernel are built once.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile

from engine.worker.channel import StderrTail
from engine.worker.failures import death_message
from engine.worker.runner_process import RunnerFailed, RunnerProcess
from engine.worker.sandbox import (
    EXCHANGE_PARENT,
    TRITON_CACHE_NAME,
    mount_points_in_tmp,
    runner_command,
)

MESSAGE_LIMIT = 1 << 16
START_DEADLINE_S, COMMAND_DEADLINE_S = 300.0, 60.0
STDERR_DRAIN_S = 2.0  # how long a dead template's last words may take to be read


class RunnerTemplate:
    """Started at once (importing torch takes seconds); `fork` gives the next runner. `LIVE` lets
    the judge end every sandbox when the engine is gone."""

    LIVE: set[RunnerTemplate] = set()

    def __init__(self, device: str):
        self.device = device
        self.root = tempfile.mkdtemp(prefix="kb-runner-", dir=EXCHANGE_PARENT)
        self.exchange = os.path.join(self.root, "xchg")
        self.warm_cache = os.path.join(self.root, "warm-cache")
        os.mkdir(self.exchange)
        self.share_works = True  # until a runner finds that shared GPU memory does not
        self.proc: subprocess.Popen | None = None
        self._start()
        RunnerTemplate.LIVE.add(self)

    def _start(self) -> None:
        self.control, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        launch = runner_command(self.device, self.exchange, self.root)
        self.sandboxed = launch.sandboxed
        self.proc = subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**launch.env, "KB_CONTROL_FD": str(template_end.fileno())},
            pass_fds=(*launch.pass_fds, template_end.fileno()),
            preexec_fn=launch.preexec_fn,
            text=True,
        )
        for fd in launch.pass_fds:
            os.close(fd)
        template_end.close()
        self.tail = StderrTail(self.proc.stderr)
        self.ready = False

    def _answer(self, deadline_s: float, what: str) -> dict:
        self.control.settimeout(deadline_s)
        try:
            data = self.control.recv(MESSAGE_LIMIT)
        except TimeoutError:
            data = None
        if not data:
            code = self.proc.poll() if data is None else self._exit_code()
            self.kill()
            if code is None:
                raise RunnerFailed("timeout", f"the runner template did not answer ({what})")
            tail = self.tail.text(last=self.tail.lines.maxlen, wait_s=STDERR_DRAIN_S)
            raise RunnerFailed("crash", death_message(f"runner template ({what})", code, tail))
        return json.loads(data)

    def _exit_code(self) -> int | None:
        """The exit code of a template that closed its end of the control socket (ending)."""
        try:
            return self.proc.wait(timeout=STDERR_DRAIN_S)
        except subprocess.TimeoutExpired:
            return None

    def _wait_ready(self) -> None:
        """Until the template has started (imported torch and triton, warmed up)."""
        if not self.ready:
            self._answer(START_DEADLINE_S, "starting")
            self.ready = True

    def _command(self, message: dict, fds: list[int] = ()) -> dict:
        self._wait_ready()
        socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
        return self._answer(COMMAND_DEADLINE_S, message["op"])

    def fork(self, triton_cache: str | None = None) -> RunnerProcess:
        """A fresh runner, its Triton cache seeded with the warm-up's and `triton_cache`'s."""
        if self.proc.poll() is not None:
            self.kill()
            self._start()
        self._wait_ready()  # its warm-up works in the box: empty it only after
        self.empty_box()
        cache = os.path.join(self.exchange, TRITON_CACHE_NAME)
        warm = os.path.isdir(self.warm_cache)
        if warm:
            seed_cache(cache, self.warm_cache)
            seed_cache(cache, triton_cache)
        ends = [os.pipe() for _ in range(3)]  # the runner's stdin, stdout, stderr
        theirs, ours = [ends[0][0], ends[1][1], ends[2][1]], [ends[0][1], ends[1][0], ends[2][0]]
        share = None
        if self.device == "cuda" and self.share_works:  # GPU memory crosses over a socket
            share, runner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            theirs.append(runner_end.detach())
        try:
            reply = self._command({"op": "fork"}, theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        runner = RunnerProcess(self, int(reply["pid"]), *ours, share=share)
        if not warm:  # the first runner's own warm-up, before anything of a candidate's is there
            runner.wait_ready(START_DEADLINE_S)
            os.makedirs(cache, exist_ok=True)  # the interpreter (cpu) writes nothing there
            shutil.copytree(cache, self.warm_cache, symlinks=True)
            seed_cache(cache, triton_cache)
        return runner

    def end(self, pid: int) -> int:
        """Kill a runner's whole process group and reap it; its exit code (-N: signal N)."""
        try:
            return int(self._command({"op": "end", "pid": pid})["exit_code"])
        except (RunnerFailed, OSError, KeyError, ValueError):
            return -9  # the template died with it

    def empty_box(self, keep_kernels: bool = False) -> None:
        """Empty the folders the box can write (but the Triton cache, with `keep_kernels`: a
        runner lent again keeps its kernels); its /tmp keeps the mount points bubblewrap made
        there (a project or venv under /tmp), which the box would lose with them."""
        for name in ("xchg", "tmp", "shm"):
            keep = mount_points_in_tmp() if name == "tmp" and self.sandboxed else ()
            if name == "xchg" and keep_kernels:
                keep = (TRITON_CACHE_NAME,)
            empty_folder(os.path.join(self.root, name), keep)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # bubblewrap: its whole sandbox dies with it
            self.proc.wait()
        self.control.close()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)
        RunnerTemplate.LIVE.discard(self)


def seed_cache(cache: str, folder: str | None) -> None:
    """Copy the Triton cache `folder` (where there is one) into `cache`."""
    if folder and os.path.isdir(folder):
        shutil.copytree(folder, cache, dirs_exist_ok=True, copy_function=_copy_if_absent)


def _copy_if_absent(source: str, target: str) -> None:
    """Triton's cache is content-addressed: a file there is already right."""
    if not os.path.exists(target):
        shutil.copy2(source, target)


def empty_folder(folder: str, keep: tuple[str, ...] = ()) -> None:
    """Remove everything in `folder` (a candidate may have taken away its own permissions) but
    the folders `keep` (relative paths: the box's mount points, engine.worker.sandbox.
    mount_points_in_tmp) and the folders on the way to them."""
    os.chmod(folder, 0o700)
    for top, dirs, _ in os.walk(folder):
        for name in dirs:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    for entry in os.scandir(folder):
        inner = tuple(os.path.relpath(k, entry.name) for k in keep
                      if k.startswith(entry.name + "/"))  # fmt: skip
        if entry.is_dir(follow_symlinks=False) and (entry.name in keep or inner):
            if entry.name not in keep:
                empty_folder(entry.path, inner)
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)
