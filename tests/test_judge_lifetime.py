"""The judge and its runners end with the engine, however the engine ends (SIGTERM as `timeout`
sends, SIGHUP as a closed SSH session sends, SIGKILL), even while the judge waits on a runner
whose candidate never finishes. A headless run starts its judge before it loads the problem, and
a run that cannot start ends the judge it started."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.worker.client import WorkerClient
from tests.adversarial.softmax import HANGS_FOREVER
from tests.cli import kernelbrain
from tests.processes import alive, command_line, descendants

ROOT = Path(__file__).parent.parent


@pytest.mark.slow  # an engine killed three ways, a judge started for each
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_judge_and_runners_die_with_the_engine(tmp_path, how):
    endless = tmp_path / "hangs.py"
    endless.write_text(HANGS_FOREVER)
    engine = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "check", "softmax", str(endless)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        # a hang-up as SSH sends it, even where pytest runs under nohup (SIGHUP ignored, which
        # its children would inherit)
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 180
    family: set[int] = set()
    while time.monotonic() < deadline:
        family = descendants(engine.pid)
        if any("kbrunner" in command_line(pid) for pid in family):
            time.sleep(3)  # the runner is in the candidate's endless loop
            family = descendants(engine.pid)
            break
        time.sleep(0.2)
    else:
        engine.kill()
        pytest.fail("no runner started within 180 s")
    assert any("engine.worker" in command_line(pid) for pid in family)  # the judge
    engine.send_signal(how)
    engine.wait(30)
    deadline = time.monotonic() + 20
    while alive(family) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = alive(family)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, [command_line(pid) for pid in left]


def judges_of_this_process() -> set[int]:
    return {pid for pid in alive(descendants(os.getpid())) if "engine.worker" in command_line(pid)}


# Loading a problem runs its get_inputs; run in the engine's process (the pid in WATCHED_PID),
# this one writes to SEEN how many judges that process had started by then beside those it had
# before (the pids in EXISTING: a module's shared backend), waiting up to 60 s for one.
PROBLEM_THAT_LOOKS_FOR_ITS_JUDGE = """
import os
import time
from pathlib import Path

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    seen = Path(os.environ["SEEN"])
    if os.getpid() == int(os.environ["WATCHED_PID"]) and not seen.exists():
        from tests.test_judge_lifetime import judges_of_this_process

        existing = {int(pid) for pid in os.environ["EXISTING"].split(",") if pid}
        deadline = time.monotonic() + 60
        while not judges_of_this_process() - existing and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.write_text(str(len(judges_of_this_process() - existing)))
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("command", ["run", "check"])
def test_run_and_check_start_their_judge_before_they_load_the_problem(tmp_path, command):
    """The judge's imports and runner template (seconds) overlap the problem's load and trace."""
    problem = tmp_path / "double.py"
    problem.write_text(PROBLEM_THAT_LOOKS_FOR_ITS_JUDGE)
    seen = tmp_path / "judges_seen_while_loading"
    args = {"run": ["--headless", "--budget", "1evals", "--sessions-dir", tmp_path / "sessions"],
            "check": [ROOT / "tests" / "candidates" / "softmax_online.py"]}[command]  # fmt: skip
    existing = ",".join(map(str, judges_of_this_process()))
    done = kernelbrain(command, problem, *args, "--backend", "cpu",
                       env={"SEEN": str(seen), "WATCHED_PID": str(os.getpid()),
                            "EXISTING": existing})  # fmt: skip
    assert seen.read_text() == "1", done.stdout + done.stderr
    if command == "run":
        assert done.returncode == 0 and "finished" in done.stderr, done.stderr
    else:  # softmax's kernel is no doubling: a verdict all the same
        assert done.returncode == 1 and "rejected" in done.stdout, done.stdout + done.stderr


def test_a_run_whose_problem_does_not_load_ends_the_judge_it_started(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                      "        return x.sum(\n")  # fmt: skip
    before = judges_of_this_process()
    run = kernelbrain("run", broken, "--headless", "--backend", "cpu",
                      "--sessions-dir", tmp_path / "sessions")  # fmt: skip
    assert run.returncode == 2
    assert "syntax error at line 5" in run.stderr
    assert judges_of_this_process() - before == set()


def test_closing_a_judge_that_is_still_starting_kills_it_at_once():
    """A run that cannot start does not wait seconds for its judge to become ready first."""
    client = WorkerClient("cpu")
    client.start_soon()
    deadline = time.monotonic() + 30
    while client.proc is None and time.monotonic() < deadline:
        time.sleep(0.01)
    judge = client.proc
    client.close()
    assert judge.returncode == -signal.SIGKILL
    assert client.isolation == {}  # it never said it was ready
