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

ROOT = Path(__file__).parent.parent


def parents() -> dict[int, int]:
    """pid -> parent pid of every process now."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(root: int) -> set[int]:
    tree, found, frontier = parents(), set(), {root}
    while frontier:
        frontier = {pid for pid, parent in tree.items() if parent in frontier} - found
        found |= frontier
    return found


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if (Path("/proc") / str(pid)).exists() and
            " Z " not in (Path("/proc") / str(pid) / "stat").read_text()}  # fmt: skip


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
