"""The session folder's contract as code: the names the engine writes and its clients read are
the sets of engine.session_files, and docs/session-format.md lists exactly those."""

import re
from pathlib import Path

import pytest

from engine.compose import create_session, resume_session
from engine.problems.problem import PRECISION_POLICIES
from engine.session import publish
from engine.session.settings import SessionSettings
from engine.session_files import (
    CANDIDATE_STATUSES,
    COMMAND_STATUSES,
    CONTROL_COMMANDS,
    EVENT_KINDS,
    INTERRUPTED,
    SEARCH_STATES,
    SessionPaths,
    read_events,
    send_command,
)

DOC = (Path(__file__).resolve().parents[1] / "docs" / "session-format.md").read_text()


def section(title: str) -> str:
    return DOC.split(f"\n## {title}\n")[1].split("\n## ")[0]


def table_names(text: str) -> tuple[str, ...]:
    """The names in the first column of a table's rows: | `name` | ... |"""
    return tuple(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE))


def documented_ledger() -> set[str]:
    """The fields of the snapshot's `ledger` as the document lists them."""
    block = section("snapshot.json").split('"ledger": {')[1].split("\n  },")[0]
    block = re.sub(r"//.*", "", block)
    block = re.sub(r"\{[^{}]*\}", "{}", block)  # the breakdowns' own keys (rungs, devices)
    return set(re.findall(r'"(\w+)":', block))


def test_the_document_lists_the_contracts_names():
    alternatives = [
        (key, tuple(names.split(" | ")))
        for key, names in re.findall(r'"(\w+)": "(\w+(?: \| \w+)+)"', DOC)
    ]
    assert alternatives == [
        ("state", SEARCH_STATES),
        ("precision_policy", PRECISION_POLICIES),
        ("status", CANDIDATE_STATUSES),
        ("status", COMMAND_STATUSES),
        ("command", CONTROL_COMMANDS),
    ]
    assert table_names(section("snapshot.json")) == CANDIDATE_STATUSES
    assert table_names(section("events.jsonl")) == EVENT_KINDS
    assert f"`{INTERRUPTED}`" in section("snapshot.json")


def test_a_session_writes_only_the_contracts_names(tmp_path):
    """A sim search with every kind of command, accepted and refused, to its stop."""
    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("softmax", "sim", seed=0, limits={"evaluations": 40}))
    engine = resume_session(paths)
    try:
        engine.start()
        while len(engine.search.population) < 3:
            engine.step()
        for command in ["veto c0001", "pin c0002", "unpin c0002", "pin c9999", "pause", "unpause"]:
            send_command(paths, *command.split())
        send_command(paths, "budget", amount="+5evals")
        statuses, states = set(), set()
        for _ in range(20):
            engine.step()
            statuses |= {c["status"] for c in engine.last_snapshot["candidates"]}
            states.add(engine.last_snapshot["state"])
        send_command(paths, "stop")
        while engine.step():
            pass
    finally:
        engine.lock.release()
        engine.store.close()
    snapshot = engine.last_snapshot
    commands = {c["status"] for c in snapshot["commands"]}
    kinds = {e["kind"] for e in read_events(paths)}
    assert statuses <= set(CANDIDATE_STATUSES) and "vetoed" in statuses
    assert states | {snapshot["state"]} <= set(SEARCH_STATES) and snapshot["state"] == "stopped"
    assert commands == set(COMMAND_STATUSES)
    assert kinds <= set(EVENT_KINDS) and {"command_rejected", "stopped"} <= kinds
    assert set(snapshot["ledger"]) == documented_ledger()


def test_the_engine_publishes_no_name_outside_the_contract(tmp_path):
    event = {"seq": 0, "ts": 0.0, "step": 0, "kind": "profiled", "message": "", "candidate": None}
    with pytest.raises(ValueError, match="event kind profiled is not in the session contract"):
        publish.append_events(SessionPaths(tmp_path), [event])


def test_the_tui_knows_every_state_and_kind():
    from kbtui.widgets.events import ALARMING
    from kbtui.widgets.status import STATE_STYLES

    assert set(STATE_STYLES) == {*SEARCH_STATES, INTERRUPTED}
    assert set(ALARMING) <= set(EVENT_KINDS)


def test_the_published_snapshot_is_the_sessions_state_after_every_step(tmp_path):
    """snapshot.json keeps the rows of candidates that a step did not change: after every step
    of a search with pins, vetoes and prunes it equals a snapshot built afresh."""
    from engine.session_files import read_snapshot

    paths = SessionPaths(tmp_path / "s")
    create_session(paths, SessionSettings("softmax", "sim", seed=0, limits={"evaluations": 60}))
    engine = resume_session(paths)
    try:
        engine.start()
        going, step = True, 0
        while going:
            if step in (4, 12):  # one queued or evaluating, one measured
                send_command(paths, "pin", engine.search.population[step // 4].id)
                send_command(paths, "veto", engine.search.population[-1].id)
            going = engine.step()
            published = read_snapshot(paths)
            fresh = engine.snapshot()
            assert {
                k: v for k, v in published.items() if k not in ("schema", "updated_at")
            } == fresh
            step += 1
    finally:
        engine.lock.release()
        engine.store.close()
    statuses = {c["status"] for c in published["candidates"]}
    assert {"pruned", "vetoed", "done"} <= statuses and any(
        c["pinned"] for c in published["candidates"]
    )
