"""The Budget pane against the ledger: after a pause it gives the paused seconds apart from the
wall clock, with the same figures as `show --json`, and the pause is in neither wall nor idle."""

from __future__ import annotations

import json
import time

import pytest
from cli import kernelbrain
from pilot_helpers import settle

from engine.compose import resume_session
from engine.session_files import SessionPaths, read_snapshot, send_command
from kbtui.app import KernelBrainApp
from kbtui.formatting import duration
from kbtui.widgets.budget import BudgetPane

pytestmark = pytest.mark.anyio
PAUSE_S = 2.0


def pause_for_a_while(paths: SessionPaths) -> dict:
    """Resume the finished session with two more evaluations and a pause in its inbox (the real
    engine, in this process), let it stand paused PAUSE_S, unpause it and run it to its end;
    returns the ledger it published when it paused."""
    send_command(paths, "budget", amount="+2evals")
    send_command(paths, "pause")
    engine = resume_session(paths)
    try:
        engine.start()
        while engine.search.schedule.state != "paused":
            engine.step()
        at_pause = engine.last_snapshot["ledger"]
        until = time.monotonic() + PAUSE_S
        while time.monotonic() < until:
            assert engine.step()
        send_command(paths, "unpause")
        while engine.step():
            pass
    finally:
        engine.lock.release()
        engine.close()
        engine.store.close()
    return at_pause


async def test_the_pane_gives_the_ledgers_paused_wall_and_idle_seconds(session):
    at_pause = pause_for_a_while(session)
    shown = kernelbrain("show", session.name, "--json", "--sessions-dir", session.root.parent)
    ledger = json.loads(shown.stdout)["ledger"]
    assert read_snapshot(session)["state"] == "finished" and ledger["evaluations"] == 62
    assert ledger["paused_seconds"] >= PAUSE_S
    assert ledger["wall_seconds"] - at_pause["wall_seconds"] < 1.0  # the pause is not in it
    assert ledger["idle_seconds"] - at_pause["idle_seconds"] < 1.0

    app = KernelBrainApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await pilot.pause()
        text = str(app.query_one(BudgetPane).query_one("Static").content)
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines()}
    assert rows["wall"][1] == duration(ledger["wall_seconds"])
    assert (
        " ".join(rows["paused"])
        == f"paused {duration(ledger['paused_seconds'])} a pause spends no budget"
    )
    assert f"idle {duration(ledger['idle_seconds'])}" in " ".join(rows["off the GPU"])
