"""Starting an engine from the TUI: while one boots (seconds of imports before it publishes) the
TUI says so and `r` starts no second one; an engine that fails says why; an engine that ends is
waited for (no zombie); `attach` to a folder that is no session fails at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pilot_helpers import ENGINE_TIMEOUT_S, settle, wait_until
from sim_session import REPO

from engine.session.lock import EngineLock
from engine.session_files import read_events, send_command, start_detached_engine
from kbtui.app import KernelBrainApp
from kbtui.widgets.status import SessionStatus

FAST_POLL = 0.05
STARTING = "the engine is starting: it runs in a few seconds"
pytestmark = pytest.mark.anyio


def status_text(app) -> str:
    return str(app.query_one(SessionStatus).render())


def said(app) -> list[str]:
    return [n.message for n in app._notifications]


def children() -> dict[int, str]:
    """This process's child processes and their states ("Z": exited, never waited for)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError):
            continue
        if int(parent) == os.getpid():
            found[int(stat.parent.name)] = state
    return found


async def test_r_while_an_engine_boots_says_so_and_starts_no_second_one(session):
    """`kernelbrain run` starts the engine, then the TUI: the engine spends seconds importing
    before it takes the session (here it is held still at its start)."""
    send_command(session, "budget", amount="+3evals")
    logged = len(read_events(session))
    engine = start_detached_engine(session)
    os.kill(engine.pid, signal.SIGSTOP)
    try:
        app = KernelBrainApp(session, poll_seconds=FAST_POLL, started=engine)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "engine starting · commands wait in the inbox" in status_text(app)
            await pilot.press("r")
            assert said(app)[-1] == STARTING
            os.kill(engine.pid, signal.SIGCONT)
            await wait_until(pilot, lambda: app.snapshot["ledger"]["evaluations"] == 63, 60)
            await wait_until(pilot, lambda: "engine not running" in status_text(app), 60)
            await wait_until(pilot, lambda: engine.returncode is not None)  # waited for
            assert engine.returncode == 0
    finally:
        if engine.poll() is None:
            os.kill(engine.pid, signal.SIGCONT)
            engine.wait(timeout=60)
    kinds = [e["kind"] for e in read_events(session)[logged:]]
    assert kinds.count("resumed") == 1 and kinds[-1] == "finished"
    assert "already run by" not in session.log.read_text()


async def test_an_engine_that_holds_the_session_but_has_not_published_is_starting(session):
    """An engine started elsewhere takes the session's lock first, then imports for seconds."""
    lock = EngineLock(session)
    lock.acquire()
    try:
        app = KernelBrainApp(session, poll_seconds=FAST_POLL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "engine starting" in status_text(app)
            await pilot.press("r")
            assert said(app)[-1] == STARTING
            assert not session.log.exists()  # no engine was started
            lock.release()
            await wait_until(pilot, lambda: "engine not running" in status_text(app))
    finally:
        lock.release()


async def test_an_engine_that_fails_shows_why(session):
    session.database.write_bytes(session.database.read_bytes()[:4096])  # a truncated database
    send_command(session, "budget", amount="+2evals")
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        before = set(children())  # the test process's own helpers, if any
        await pilot.press("r")
        await wait_until(pilot, lambda: "engine failed" in status_text(app), ENGINE_TIMEOUT_S)
        failure = app.engine.failure
        assert failure.startswith(f"kernelbrain resume: cannot open {session.database}")
        assert failure.endswith("`kernelbrain export sim-demo` writes its best candidate, "
                                "`kernelbrain attach sim-demo` shows it")  # fmt: skip
        assert f"engine failed: {failure}"[:70] in status_text(app)  # one line, cut to fit
        assert f"the engine failed: {failure}" in said(app)
        await wait_until(pilot, lambda: set(children()) <= before)  # waited for: no zombie


async def test_an_engine_started_with_r_is_waited_for_when_it_ends(session):
    send_command(session, "budget", amount="+2evals")
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        before = set(children())  # the test process's own helpers, if any
        await pilot.press("r")
        await wait_until(pilot, lambda: app.snapshot["ledger"]["evaluations"] == 62, 60)
        await wait_until(pilot, lambda: "engine not running" in status_text(app), 60)
        await wait_until(pilot, lambda: set(children()) <= before)  # waited for: no zombie


def test_attach_to_a_folder_that_is_no_session_fails_at_once(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    result = subprocess.run(
        [sys.executable, "-m", "engine.cli", "attach", str(folder)],
        cwd=REPO, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        f"kernelbrain attach: {folder} is not a KernelBrain session (it has no state.duckdb): "
        "give a session's name or the folder `kernelbrain run` made\n"
    )
