"""Pilot tests: pin, veto and pause flows end in a command the engine acknowledged."""

from __future__ import annotations

import json
import time

import pytest
from pilot_helpers import settle, wait_until

from engine.session_files import SessionPaths, read_snapshot, write_json_atomic
from kbtui.app import KernelBrainApp
from kbtui.widgets.queue import QueueTable
from kbtui.widgets.status import SessionStatus

FAST_POLL = 0.05
pytestmark = pytest.mark.anyio


def engine_applies_inbox(paths: SessionPaths, reject: bool = False) -> list[dict]:
    """Engine stand-in until the engine lands: apply each inbox command at a "step boundary",
    list it in the snapshot's `commands`, log its event, and take it out of the inbox."""
    snapshot = read_snapshot(paths)
    rows = {row["id"]: row for row in snapshot["candidates"]}
    applied = []
    for path in sorted(paths.inbox.glob("*.json")):
        command = json.loads(path.read_text())
        name, target = command["command"], rows.get(command["candidate"])
        if not reject:
            if name in ("pin", "unpin"):
                target["pinned"] = name == "pin"
            elif name == "veto":
                target["vetoed"] = True
            elif name in ("pause", "unpause"):
                snapshot["state"] = "paused" if name == "pause" else "running"
        status = "rejected" if reject else "applied"
        applied.append({**command, "applied_at": time.time(), "status": status, "message": ""})
        path.unlink()
    snapshot["commands"] += applied
    snapshot["step"] += 1
    write_json_atomic(paths.snapshot, snapshot)
    return applied


def flags_of(app, candidate_id: str) -> str:
    return app.query_one(QueueTable).get_cell(candidate_id, "flags").plain


def status_text(app) -> str:
    return str(app.query_one(SessionStatus).render())


async def select(pilot, candidate_id: str) -> None:
    table = pilot.app.query_one(QueueTable)
    table.move_cursor(row=table.get_row_index(candidate_id))
    await wait_until(pilot, lambda: pilot.app.selected_id == candidate_id)


async def test_pin_shows_pending_until_the_engine_applies_it(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, "c0002")
        await pilot.press("p")
        [sent] = [json.loads(p.read_text()) for p in session.inbox.glob("*.json")]
        assert (sent["command"], sent["candidate"]) == ("pin", "c0002")
        assert flags_of(app, "c0002") == "pin…"
        assert "pending: pin c0002" in status_text(app)

        [applied] = engine_applies_inbox(session)
        await wait_until(pilot, lambda: len(app.pending) == 0)
        assert applied["id"] == sent["id"]
        assert flags_of(app, "c0002") == "pin"
        assert "pending" not in status_text(app)


async def test_veto_is_acknowledged_and_marks_the_row(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, "c0005")
        await pilot.press("v")
        assert flags_of(app, "c0005") == "veto…"
        engine_applies_inbox(session)
        await wait_until(pilot, lambda: flags_of(app, "c0005") == "veto")
        assert len(app.pending) == 0


async def test_pause_then_unpause(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("space")
        assert [c["command"] for c in app.pending] == ["pause"]
        engine_applies_inbox(session)
        await wait_until(pilot, lambda: app.snapshot["state"] == "paused" and not app.pending)
        assert "paused" in status_text(app)

        await pilot.press("space")
        assert [c["command"] for c in app.pending] == ["unpause"]
        engine_applies_inbox(session)
        await wait_until(pilot, lambda: app.snapshot["state"] == "running" and not app.pending)


async def test_a_rejected_command_is_settled_and_reported(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("plus")
        [sent] = list(app.pending)
        assert (sent["command"], sent["amount"]) == ("budget", "+10m")
        engine_applies_inbox(session, reject=True)
        await wait_until(pilot, lambda: not app.pending)
        assert any("budget +10m rejected" in n.message for n in app._notifications)


async def test_cursor_stays_on_its_candidate_when_rows_reorder(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, "c0001")
        table = app.query_one(QueueTable)
        before = table.cursor_row
        snapshot = read_snapshot(session)
        for row in snapshot["candidates"]:
            if row["id"] == "c0001":
                row["score"] = 9.0
        snapshot["step"] += 1
        write_json_atomic(session.snapshot, snapshot)
        await wait_until(pilot, lambda: app.snapshot["step"] == snapshot["step"])
        assert table.cursor_row == 0 != before
        assert app.selected_id == "c0001"
        assert table.get_cell("c0001", "score").plain == "9"
