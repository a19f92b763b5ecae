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
