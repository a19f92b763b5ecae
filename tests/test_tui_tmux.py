"""End to end in a real terminal: start a sim run with its TUI, pin a candidate, detach, and
check that the engine went on and the pin held."""

import json
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from engine.session_files import SessionPaths, engine_running, read_snapshot

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def wait_until(condition, what, timeout=60, seen=lambda: ""):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n{seen()}")


def test_attach_pin_detach_engine_goes_on(tmp_path):
    name = f"kb-e2e-{uuid.uuid4().hex[:8]}"
    paths = SessionPaths(tmp_path / "e2e")
    command = (
        f"{sys.executable} -m engine.cli run matvec --backend sim --budget 100000evals "
        f"--session e2e --sessions-dir {tmp_path}"
    )
    tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command)
    try:
        screen = lambda: tmux("capture-pane", "-p", "-t", name)  # noqa: E731
        # The queue is sorted by score, so which candidates are on screen depends on timing.
        wait_until(
            lambda: "Queue" in screen() and re.search(r"\bc\d{4}\b", screen()),
            "the TUI's queue to show candidates",
            seen=screen,
        )
        tmux("send-keys", "-t", name, "p")
        wait_until(
            lambda: any(
                c["command"] == "pin" and c["status"] == "applied"
                for c in (read_snapshot(paths) or {}).get("commands", [])
            ),
            "the engine to apply the pin",
        )
        pinned = [c for c in read_snapshot(paths)["commands"] if c["command"] == "pin"][0]
        tmux("send-keys", "-t", name, "q")  # detach: quit the TUI
        wait_until(
            lambda: (
                subprocess.run(["tmux", "has-session", "-t", name], capture_output=True).returncode
                != 0
            ),
            "the TUI (the tmux session's only program) to exit",
        )
        assert engine_running(paths), "quitting the TUI stopped the engine"
        step = read_snapshot(paths)["step"]
        wait_until(lambda: read_snapshot(paths)["step"] > step + 5, "the engine to go on")
        rows = {c["id"]: c for c in read_snapshot(paths)["candidates"]}
        assert rows[pinned["candidate"]]["pinned"] is True
        assert rows[pinned["candidate"]]["status"] != "pruned"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        subprocess.run(
            [sys.executable, "-m", "engine.cli", "stop", "e2e", "--sessions-dir", str(tmp_path)],
            capture_output=True,
        )
        wait_until(lambda: not engine_running(paths), "the engine to stop")
    events = [json.loads(line) for line in paths.events.read_text().splitlines()]
    assert any(e["kind"] == "command_applied" and e["command"] == pinned["id"] for e in events)
