"""What the user tells KernelBrain about the code it runs: --allow-torch-ops kept with the session
and shown everywhere, and the refusal to run LLM-written code without the OS sandbox."""

import json
import subprocess

import pytest
import torch
from cli import kernelbrain, kernelbrain_process

from tests.adversarial.softmax import candidate

kb = kernelbrain  # the commands in this process; the judge's processes are real


def test_allowed_torch_ops_are_kept_and_shown_by_show_and_export(tmp_path):
    folder = ["--sessions-dir", str(tmp_path)]
    run = kb("run", "softmax", "--backend", "sim", "--headless", "--budget", "6evals",
             "--session", "hybrid", "--allow-torch-ops", "mm,addmm", *folder)  # fmt: skip
    assert run.returncode == 0, run.stderr
    shown = kb("show", "hybrid", *folder)
    assert "torch ops allowed in forward: mm, addmm" in shown.stdout
    assert json.loads(kb("show", "hybrid", "--json", *folder).stdout)["allowed_torch_ops"] == [
        "mm",
        "addmm",
    ]
    exported = kb("export", "hybrid", *folder)
    assert exported.returncode == 0, exported.stderr
    assert "# Hybrid: forward computes with torch mm, addmm." in exported.stdout


def test_a_bad_operator_list_is_a_usage_error(tmp_path):
    done = kb("run", "softmax", "--backend", "sim", "--allow-torch-ops", "mm;rm -rf",
              "--sessions-dir", str(tmp_path))  # fmt: skip
    assert done.returncode == 2 and "operator names separated by commas" in done.stderr


def test_check_admits_an_allowed_operator_and_no_other(tmp_path):
    hybrid = tmp_path / "hybrid.py"
    hybrid.write_text(candidate("launch(x)\nreturn torch.softmax(x, 1)"))
    assert kb("check", "softmax", str(hybrid)).returncode == 1
    allowed = kb("check", "softmax", str(hybrid), "--allow-torch-ops", "softmax")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_llm_runs_need_the_sandbox_unless_trusted(tmp_path):
    env = {"KERNELBRAIN_BWRAP": "0"}  # read once a process: these are real ones
    args = ("run", "softmax", "--backend", "cpu", "--generator", "llm", "--model", "openai/x",
            "--sessions-dir", str(tmp_path), "--headless")  # fmt: skip
    refused = kernelbrain_process(*args, env=env)
    assert refused.returncode == 2
    assert "without the OS sandbox" in refused.stderr and "--trust-candidates" in refused.stderr
    assert not list(tmp_path.iterdir())  # nothing was created
    offline = kernelbrain_process("run", "softmax", "--backend", "sim", "--headless", "--budget",
                                  "3evals", "--sessions-dir", str(tmp_path), env=env)  # fmt: skip
    assert offline.returncode == 0, offline.stderr  # its own templates may run with less


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine: nothing to refuse")
def test_run_on_cuda_without_a_gpu_is_refused_up_front(tmp_path):
    done = kb("run", "softmax", "--backend", "cuda", "--headless", "--sessions-dir", str(tmp_path))
    assert done.returncode == 2
    assert "--backend cuda needs a GPU" in done.stderr and "--backend cpu" in done.stderr
    assert not list(tmp_path.iterdir())  # no session was created


def test_run_without_a_terminal_runs_headless_and_ends(tmp_path):
    """A real process whose standard streams are not a terminal, as under nohup or cron."""
    done = kernelbrain_process("run", "softmax", "--backend", "sim", "--budget", "4evals",
                               "--sessions-dir", tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "no terminal for the TUI" in done.stderr and "running headless" in done.stderr
    assert "\x1b[" not in done.stdout + done.stderr  # no escape codes
    assert "finished" in done.stderr


# The sandbox rule, the same for every command (issue 33, item 6).
INSTALL_COMMANDS = (
    "apt-get install bubblewrap",
    "dnf install bubblewrap",
    "pacman -S bubblewrap",
    "zypper install bubblewrap",
    "apk add bubblewrap",
)
UNSANDBOXED = "candidates run without the OS sandbox"


def says_how_to_install_bubblewrap(text: str) -> bool:
    return all(command in text for command in INSTALL_COMMANDS)


def test_an_offline_run_without_the_sandbox_says_once_why_and_finishes(tmp_path):
    done = kernelbrain_process("run", "softmax", "--backend", "cpu", "--headless", "--budget",
                               "1evals", "--sessions-dir", tmp_path,
                               env={"KERNELBRAIN_BWRAP": "0"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(UNSANDBOXED) == 1 and "the sandbox" not in done.stdout
    notice = next(line for line in done.stderr.splitlines() if UNSANDBOXED in line)
    assert "turned off by KERNELBRAIN_BWRAP=0" in notice and says_how_to_install_bubblewrap(notice)
    assert "they are the hint library's own code" in notice
    assert "finished: budget spent" in done.stderr


def test_a_run_in_the_sandbox_says_so_once(tmp_path, sandbox_choice_again):
    from engine.worker.sandbox import isolation

    if not isolation().sandboxed:
        pytest.skip(f"no sandbox on this machine: {isolation().detail}")
    done = kernelbrain_process("run", "softmax", "--backend", "cpu", "--headless", "--budget",
                               "1evals", "--sessions-dir", tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("candidates run in the bubblewrap sandbox") == 1
    assert "without the OS sandbox" not in done.stderr


def test_an_llm_run_without_the_sandbox_is_refused_saying_how_to_install_it(tmp_path):
    refused = kernelbrain_process("run", "softmax", "--backend", "cpu", "--generator", "llm",
                                  "--model", "openai/x", "--sessions-dir", tmp_path,
                                  "--headless", env={"KERNELBRAIN_BWRAP": "0"})  # fmt: skip
    assert refused.returncode == 2 and "refusing to run candidate code" in refused.stderr
    assert says_how_to_install_bubblewrap(refused.stderr) and "--trust-candidates" in refused.stderr
    assert not list(tmp_path.iterdir())  # nothing was created, nothing ran


def test_resuming_an_llm_session_without_the_sandbox_needs_trust_too(tmp_path, monkeypatch):
    """The refusal holds for `resume` (which the TUI's detached engine runs) before any request
    to the LLM; trust given as the environment that run and resume pass to the engines they
    start lets it run, and it says so."""
    from llm_server import GOOD_REPLY, Reply, ScriptedLLMServer

    from engine.compose import create_session
    from engine.search.budget import parse_budget
    from engine.session.settings import SessionSettings
    from engine.session_files import SessionPaths, read_snapshot

    keys = {"OPENAI_API_KEY": "sk-test-dummy", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    paths = SessionPaths(tmp_path / "llm")
    with ScriptedLLMServer([Reply(GOOD_REPLY)]) as server:
        create_session(paths, SessionSettings(
            problem="softmax", backend="cpu", seed=0, limits=parse_budget(["1evals"]),
            generator="llm", model="openai/gpt-4o-mini", api_base=server.url,
        ))  # fmt: skip
        args = ("resume", "llm", "--headless", "--sessions-dir", tmp_path)
        refused = kernelbrain_process(*args, env={"KERNELBRAIN_BWRAP": "0"})
        assert refused.returncode == 2, refused.stderr
        assert "refusing to run candidate code without the OS sandbox" in refused.stderr
        assert says_how_to_install_bubblewrap(refused.stderr)
        assert not server.chat_requests and read_snapshot(paths) is None  # nothing ran
        trusted = kernelbrain_process(*args, env={"KERNELBRAIN_BWRAP": "0",
                                                  "KERNELBRAIN_TRUST_CANDIDATES": "1"})  # fmt: skip
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stderr.count(UNSANDBOXED) == 1
    assert "as --trust-candidates allows: code an LLM wrote, which you trust" in trusted.stderr
    assert server.chat_requests and read_snapshot(paths)["ledger"]["evaluations"] == 1


@pytest.fixture
def sandbox_choice_again(monkeypatch):
    """`isolation()` is worked out once a process: again for this test, and after it."""
    from engine.worker.sandbox import isolation

    isolation.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    isolation.cache_clear()


@pytest.mark.parametrize("how", ["turned off", "not installed"])
def test_doctor_says_how_to_install_bubblewrap_when_there_is_no_sandbox(how, sandbox_choice_again,
                                                                         tmp_path):  # fmt: skip
    if how == "turned off":
        sandbox_choice_again.setenv("KERNELBRAIN_BWRAP", "0")
    else:  # no bwrap on the PATH
        sandbox_choice_again.delenv("KERNELBRAIN_BWRAP", raising=False)
        sandbox_choice_again.setenv("PATH", str(tmp_path))
    done = kb("doctor")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("candidate sandbox"))
    assert f"none: {'turned off' if how == 'turned off' else 'bubblewrap is not installed'}" in line
    assert says_how_to_install_bubblewrap(line)
