"""Pilot tests against a real engine: pin, veto, pause and budget flows end in commands the
engine acknowledged, and `r` resumes a finished session once it has budget."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from live_engine import command_record
from pilot_helpers import ENGINE_TIMEOUT_S, select, settle, wait_until
from sim_session import engine_cli

import kbtui.app
from engine.session_files import SessionPaths, read_events, read_snapshot, send_command
from kbtui.app import KernelBrainApp
from kbtui.messages import SessionChanged
from kbtui.widgets.queue import QueueTable
from kbtui.widgets.status import SessionStatus

FAST_POLL = 0.05
PRUNED = "c0018"  # pruned at rung 1 in the sim run
pytestmark = pytest.mark.anyio


def flags_of(app, candidate_id: str) -> str:
    return app.query_one(QueueTable).get_cell(candidate_id, "flags").plain


def status_text(app) -> str:
    return str(app.query_one(SessionStatus).render())


def row_of(paths, candidate_id: str) -> dict:
    return next(r for r in read_snapshot(paths)["candidates"] if r["id"] == candidate_id)


async def press_and_catch(pilot, engine, key: str) -> dict:
    """Press `key` with the engine frozen, so that the command the key sends is still pending
    when we look; return that command."""
    with engine.frozen():
        await pilot.press(key)
        [sent] = list(pilot.app.pending)
    return sent


async def acknowledged(pilot, sent: dict) -> dict:
    """Wait until the app has settled `sent` and snapshot.json lists it; return that record."""

    def settled() -> bool:
        in_snapshot = command_record(pilot.app.paths, sent["id"]) is not None
        return in_snapshot and sent["id"] not in {c["id"] for c in pilot.app.pending}

    await wait_until(pilot, settled, ENGINE_TIMEOUT_S)
    return command_record(pilot.app.paths, sent["id"])


async def test_pin_shows_pending_until_the_engine_applies_it(live_engine):
    paths = live_engine.paths
    assert row_of(paths, PRUNED)["status"] == "pruned"
    app = KernelBrainApp(paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, PRUNED)
        with live_engine.frozen():
            await pilot.press("p")
            [sent] = [json.loads(p.read_text()) for p in paths.inbox.glob("*.json")]
            assert (sent["command"], sent["candidate"]) == ("pin", PRUNED)
            await pilot.pause(0.2)  # a few polls: nothing can settle it while the engine waits
            assert flags_of(app, PRUNED) == "pin…"
            assert f"pending: pin {PRUNED}" in status_text(app)

        record = await acknowledged(pilot, sent)
        assert (record["status"], record["message"]) == ("applied", f"pin {PRUNED}")
        await wait_until(pilot, lambda: flags_of(app, PRUNED) == "pin")
        assert "pending" not in status_text(app)
        assert any(f"pin {PRUNED} applied" in n.message for n in app._notifications)
        assert row_of(paths, PRUNED)["status"] == "alive"  # a pin revives a pruned candidate


async def test_veto_is_acknowledged_and_marks_the_row(live_engine):
    paths = live_engine.paths
    app = KernelBrainApp(paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, PRUNED)
        with live_engine.frozen():
            await pilot.press("v")
            [sent] = list(app.pending)
            assert flags_of(app, PRUNED) == "veto…"

        assert (await acknowledged(pilot, sent))["status"] == "applied"
        await wait_until(pilot, lambda: flags_of(app, PRUNED) == "veto")
        assert app.query_one(QueueTable).get_cell(PRUNED, "status").plain == "vetoed"
        events = [e for e in read_events(paths) if e["command"] == sent["id"]]
        assert [e["kind"] for e in events] == ["command_applied"]


async def test_unpause_lets_the_engine_go_on_and_pause_stops_it(live_engine):
    paths = live_engine.paths
    app = KernelBrainApp(paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "paused" in status_text(app)
        paused_at = app.snapshot["step"]

        unpause = await press_and_catch(pilot, live_engine, "space")
        assert unpause["command"] == "unpause"
        assert (await acknowledged(pilot, unpause))["status"] == "applied"
        await wait_until(pilot, lambda: app.snapshot["step"] > paused_at + 3, ENGINE_TIMEOUT_S)
        assert app.snapshot["state"] == "running"

        pause = await press_and_catch(pilot, live_engine, "space")
        assert pause["command"] == "pause"
        assert (await acknowledged(pilot, pause))["status"] == "applied"
        await wait_until(pilot, lambda: app.snapshot["state"] == "paused")
        assert "paused" in status_text(app)
    assert read_snapshot(paths)["state"] == "paused"


async def test_added_wall_time_never_shortens_a_run_without_a_wall_limit(live_engine):
    """`+` adds ten minutes of wall time to a session with only an evaluations limit: wall time
    stays unlimited (adding budget never creates a limit, which would shorten the run)."""
    app = KernelBrainApp(live_engine.paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        sent = await press_and_catch(pilot, live_engine, "plus")
        assert (sent["command"], sent["amount"]) == ("budget", "+10m")
        record = await acknowledged(pilot, sent)
        assert (record["status"], record["message"]) == (
            "applied",
            "no wall_seconds limit: it stays unlimited",
        )
        assert any("budget +10m applied: no wall_seconds" in n.message for n in app._notifications)
        limits = read_snapshot(live_engine.paths)["budget"]["limits"]
        assert limits.get("wall_seconds") is None and limits["evaluations"] > 1000


async def test_cursor_stays_on_its_candidate_when_rows_reorder(live_engine):
    app = KernelBrainApp(live_engine.paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.query_one(QueueTable)
        table.sort_by("status")
        await select(pilot, PRUNED)
        before = table.cursor_row
        # Pinned, a pruned candidate is alive again: its row moves up the status order.
        sent = await press_and_catch(pilot, live_engine, "p")
        await acknowledged(pilot, sent)
        await wait_until(pilot, lambda: table.get_cell(PRUNED, "status").plain == "alive")
        assert table.cursor_row == table.get_row_index(PRUNED) < before
        assert app.selected_id == PRUNED


async def test_r_resumes_a_finished_session_once_it_has_budget(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.engine_is_running is False
        assert "engine not running" in status_text(app)
        logged = len(read_events(session))
        await pilot.press("r")  # its budget is spent: r says so and starts nothing
        said = [n.message for n in app._notifications]
        assert any("`kernelbrain budget sim-demo +100evals`" in m for m in said), said
        assert not session.log.exists() and len(read_events(session)) == logged

        send_command(session, "budget", amount="+2evals")
        await pilot.press("r")

        def resumed_and_finished() -> bool:
            kinds = [e["kind"] for e in read_events(session)[logged:]]
            return kinds[:1] == ["resumed"] and kinds[-1:] == ["finished"]

        await wait_until(pilot, resumed_and_finished, ENGINE_TIMEOUT_S)
        # "starting" is not running either: wait for the engine's end to be seen
        await wait_until(pilot, lambda: "engine not running" in status_text(app), ENGINE_TIMEOUT_S)
        assert app.engine_is_running is False
        assert read_snapshot(session)["ledger"]["evaluations"] == 62


async def test_status_line_says_when_the_session_allows_tf32(tmp_path):
    """A strict session (the default) is not marked; a tf32 one says so on the status line."""
    lines = {}
    for policy in ("strict", "tf32"):
        engine_cli(
            "run", "linear_relu_div", "--backend", "sim", "--headless", "--budget", "3evals",
            "--precision", policy, "--session", policy, sessions_dir=tmp_path,
        )  # fmt: skip
        app = KernelBrainApp(SessionPaths(tmp_path / policy), poll_seconds=FAST_POLL)
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot)
            lines[policy] = status_text(app)
    assert "TF32 allowed" in lines["tf32"]
    assert "TF32" not in lines["strict"]


async def test_a_slow_ui_draws_the_newest_state_and_loses_no_event(live_engine):
    """When drawing is slower than the engine (a slow SSH link), each drawing takes in all that
    changed since the previous one: the newest snapshot and every new event line, exactly once,
    instead of a backlog of out-of-date states."""
    paths = live_engine.paths
    drawn_steps, delivered_seqs, posted_at, drawn_at = [], [], [], []

    class SlowApp(KernelBrainApp):  # Textual calls this and the app's own handler
        CSS_PATH = Path(kbtui.app.__file__).with_name(KernelBrainApp.CSS_PATH)

        def on_session_changed(self, message: SessionChanged) -> None:
            posted_at.append(message.time)  # Textual stamps it when posted
            time.sleep(0.2)
            if message.changes.snapshot is not None:
                drawn_steps.append(message.changes.snapshot["step"])
            delivered_seqs.extend(e["seq"] for e in message.changes.events)
            drawn_at.append(time.monotonic())

    app = SlowApp(paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        first_step = app.snapshot["step"]
        send_command(paths, "unpause")
        await pilot.pause(2.0)
        pause = send_command(paths, "pause")
        await wait_until(pilot, lambda: command_record(paths, pause["id"]), ENGINE_TIMEOUT_S)
        final = read_snapshot(paths)
        await wait_until(pilot, lambda: app.snapshot["step"] == final["step"], ENGINE_TIMEOUT_S)
        await wait_until(
            pilot, lambda: len(delivered_seqs) == len(read_events(paths)), ENGINE_TIMEOUT_S
        )
    steps_taken = final["step"] - first_step
    drawings = len([s for s in drawn_steps if s > first_step])
    assert drawings < steps_taken, f"{drawings} drawings for {steps_taken} engine steps"
    # News is posted only once the drawing before it is done: it never queues behind stale news.
    queued = [i for i in range(1, len(posted_at)) if posted_at[i] < drawn_at[i - 1]]
    assert not queued, f"news {queued} was posted while an earlier one waited to be drawn"
    assert delivered_seqs == [e["seq"] for e in read_events(paths)]
