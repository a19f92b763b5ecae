"""The runner's box: bubblewrap namespaces, a seccomp filter, an environment without secrets."""

import os
import subprocess
import textwrap

import pytest

from engine.worker.runner_process import RunnerProcess
from engine.worker.sandbox import (
    isolation,
    runner_command,
    runner_environment,
    worker_environment,
)

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


def run_boxed(code: str, device: str = "cpu") -> subprocess.CompletedProcess:
    """`code` run by Python inside the runner's sandbox (the seccomp filter included)."""
    exchange = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
    launch = runner_command(device, exchange, plain_root=exchange)
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
def test_sandbox_refuses_sockets_and_processes_but_not_threads():
    done = run_boxed(
        textwrap.dedent("""
        import os, socket, threading
        outcomes = []
        for attempt in (lambda: socket.socket(socket.AF_INET),
                        lambda: socket.socket(socket.AF_UNIX),
                        lambda: socket.socketpair(),
                        os.fork):
            try:
                attempt()
                outcomes.append("allowed")
            except PermissionError:
                outcomes.append("refused")
        worker = threading.Thread(target=lambda: outcomes.append("thread"))
        worker.start()
        worker.join()
        print(",".join(outcomes))
    """)
    )
    assert done.stdout.strip() == "refused,refused,refused,refused,thread", done.stderr


@sandboxed
def test_sandbox_shows_no_project_home_sessions_or_programs():
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
    done = run_boxed(code)
    identity, visible, interfaces, users = done.stdout.strip().splitlines()
    uid, pid, cwd = identity.split(maxsplit=2)
    assert (uid, int(pid) < 10) == ("65534", True), done.stderr  # own user and PID namespace
    assert cwd == "[]"  # an empty working folder
    assert visible == "[]"
    assert interfaces == "1"  # only the loopback of its own network namespace
    assert users == "runner"  # its own user, not the machine's accounts


@sandboxed
def test_a_runner_reports_its_namespace_and_dies_with_its_judge():
    runner = RunnerProcess("cpu")
    try:
        ready = runner.wait_ready(120)
        assert runner.sandboxed and ready["interfaces"] == ["lo"]
    finally:
        runner.close()
    assert not os.path.exists(runner.exchange)
