"""The runner's box: bubblewrap namespaces, a seccomp filter, an environment without secrets."""

import os
import subprocess
import textwrap

import pytest

from engine.worker.sandbox import (
    isolation,
    runner_command,
    runner_environment,
    worker_environment,
)
from engine.worker.template import RunnerTemplate, empty_folder

sandboxed = pytest.mark.skipif(not isolation().sandboxed, reason=isolation().detail)


def test_judge_environment_drops_keys_and_provider_variables():
    base = {
        "HOME": "/root",
        "PATH": "/bin",
        "OPENAI_API_KEY": "x",
        "ANTHROPIC_BASE_URL": "x",
        "MY_SERVICE_TOKEN": "x",
        "AWS_REGION": "x",
        "HF_HOME": "x",
        "DB_PASSWORD": "x",
        "GEMINI_MODEL": "x",
        "TRITON_INTERPRET": "1",
    }
    env = worker_environment("cpu", base)
    assert {"HOME", "PATH", "PYTHONPATH", "TRITON_INTERPRET"} == set(env)
    assert env["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in worker_environment("cuda", base)


def test_runner_environment_holds_nothing_of_the_engines(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("SOME_SETTING", "value")
    env = runner_environment("cpu", "/xchg", "/opt/kb")
    assert not {"OPENAI_API_KEY", "SOME_SETTING"} & set(env)
    assert env["HOME"] == "/tmp" and env["PATH"] == ""


def run_boxed(code: str, scratch, device: str = "cpu") -> subprocess.CompletedProcess:
    """`code` run by Python inside the runner's sandbox (its seccomp filter included)."""
    launch = runner_command(device, str(scratch), str(scratch))
    argv = launch.argv[: launch.argv.index("--") + 1] + [launch.argv[-4], "-S", "-c", code]
    done = subprocess.run(
        argv,
        env=launch.env,
        pass_fds=launch.pass_fds,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=launch.preexec_fn,
    )
    for fd in launch.pass_fds:
        os.close(fd)
    return done


@sandboxed
def test_sandbox_refuses_sockets_of_every_family(tmp_path):
    done = run_boxed(
        textwrap.dedent("""
        import socket
        outcomes = []
        for attempt in (lambda: socket.socket(socket.AF_INET),
                        lambda: socket.socket(socket.AF_UNIX),
                        lambda: socket.socketpair()):
            try:
                attempt()
                outcomes.append("allowed")
            except PermissionError:
                outcomes.append("refused")
        print(",".join(outcomes))
    """),
        tmp_path,
    )
    assert done.stdout.strip() == "refused,refused,refused", done.stderr


@sandboxed
def test_a_runners_filter_keeps_it_to_itself_but_allows_threads(tmp_path):
    """What a runner installs before its candidate: no new process, no signal but to itself,
    no ptrace, no new session, no System V IPC (which would outlive it); threads stay."""
    done = run_boxed(
        textwrap.dedent("""
        import ctypes, os, signal, threading
        from kbrunner.seccomp import candidate_program, install
        parent = os.getppid()
        signal.signal(signal.SIGUSR1, lambda *a: outcomes.append("own signal"))
        install(candidate_program(os.getpid(), allow_processes=False))
        libc = ctypes.CDLL(None, use_errno=True)
        outcomes = []
        for name, attempt in (("fork", os.fork), ("kill parent", lambda: os.kill(parent, 0)),
                              ("kill group", lambda: os.kill(0, 0)), ("setsid", os.setsid),
                              ("setpgid", lambda: os.setpgid(0, 0))):
            try:
                attempt()
                outcomes.append(name)
            except PermissionError:
                pass
        if libc.ptrace(16, parent, 0, 0) == 0:  # PTRACE_ATTACH
            outcomes.append("ptrace")
        if libc.shmget(0, 4096, 0o1666) != -1:  # IPC_PRIVATE, IPC_CREAT
            outcomes.append("shmget")
        os.kill(os.getpid(), signal.SIGUSR1)
        worker = threading.Thread(target=lambda: outcomes.append("thread"))
        worker.start()
        worker.join()
        print(",".join(outcomes))
    """),
        tmp_path,
    )
    assert done.stdout.strip() == "own signal,thread", done.stderr


@sandboxed
def test_sandbox_shows_no_project_home_sessions_or_programs(tmp_path):
    project = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    home = os.path.expanduser("~")
    hidden = [f"{project}/README.md", f"{project}/sessions", f"{home}/.bashrc", "/etc/shadow"]
    hidden += ["/bin/sh", "/usr/bin/env", "/usr/bin/gcc"]
    code = f"""
import os
print(os.getuid(), os.getpid(), os.listdir("."))
print([p for p in {hidden!r} if os.path.exists(p)])
print(open("/proc/net/dev").read().count(":"))
print(open("/etc/passwd").read().split(":")[0])
"""
    done = run_boxed(code, tmp_path)
    identity, visible, interfaces, users = done.stdout.strip().splitlines()
    uid, pid, cwd = identity.split(maxsplit=2)
    assert (uid, int(pid) < 10) == ("65534", True), done.stderr  # own user and PID namespace
    assert cwd == "[]"  # an empty working folder
    assert visible == "[]"
    assert interfaces == "1"  # only the loopback of its own network namespace
    assert users == "runner"  # its own user, not the machine's accounts


@sandboxed
def test_runners_are_forked_fresh_in_the_template_sandbox_that_dies_with_its_judge():
    template = RunnerTemplate("cpu")
    try:
        pids = []
        for _ in range(2):
            runner = template.fork()
            ready = runner.wait_ready(120)
            assert runner.sandboxed and ready["interfaces"] == ["lo"]
            pids.append(ready["pid"])
            runner.close()
            assert runner.exit_code == -9  # killed and reaped by the template
        assert pids[0] != pids[1]
        box = template.proc.pid
        assert template.end(pids[0]) == -9  # reaped already: the template answers and lives on
        assert template.fork().wait_ready(120)["ready"] and template.proc.pid == box
    finally:
        template.close()
    assert template.proc.poll() is not None and not os.path.exists(template.root)


def test_emptying_a_box_keeps_the_mount_points_in_its_tmp(tmp_path):
    """A project or venv under /tmp is shown in the box through mount points that bubblewrap
    makes inside the box's own /tmp: emptying that folder between runners must keep them (the
    box would lose torch's modules not yet imported), and remove all else."""
    box = tmp_path / "tmp"
    (box / "ci" / ".venv" / "lib" / "site").mkdir(parents=True)
    (box / "ci" / "left-by-a-candidate").write_text("x")
    (box / "ci" / ".venv" / "note").write_text("x")
    (box / "elsewhere").mkdir()
    (box / "file").write_text("x")
    empty_folder(str(box), ("ci/.venv/lib/site",))
    left = sorted(str(p.relative_to(box)) for p in box.rglob("*"))
    assert left == ["ci", "ci/.venv", "ci/.venv/lib", "ci/.venv/lib/site"]
