"""The judge and its runners end with the engine, however the engine ends (SIGTERM as `timeout`
sends, SIGHUP as a closed SSH session sends, SIGKILL), even while the judge waits on a runner
whose candidate never finishes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.adversarial.softmax import HANGS_FOREVER
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
