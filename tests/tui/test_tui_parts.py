"""The TUI's parts that need no screen: diff alignment, command tracking, the session poller,
export, the detached resume, the plot, and `kernelbrain attach`'s session lookup."""

from __future__ import annotations

import json
import os

import pytest
from sim_session import NAME

from engine.cli import UsageError
from engine.cli.attach import resolve_session
from engine.session.lock import EngineLock
from engine.session_files import (
    ExportError,
    read_snapshot,
    resume_command,
    send_command,
    start_detached_engine,
    write_json_atomic,
)
from kbtui.diffing import change_counts, side_by_side
from kbtui.operations import export_candidate
from kbtui.pending import PendingCommands
from kbtui.plot import best_speedup_plot
from kbtui.poller import EngineState, SessionPoller
from kbtui.widgets.status import status_content

BEST, BEST_PARENT = "c0007", "c0001"  # the sim run's best candidate and its parent


def test_side_by_side_pairs_changed_lines_and_pads_the_shorter_side():
    rows = side_by_side(["a", "b", "c"], ["a", "B", "B2", "c"])
    assert [(r.tag, r.left, r.right) for r in rows] == [
        ("equal", 0, 0),
        ("replace", 1, 1),
        ("replace", None, 2),
        ("equal", 2, 3),
    ]
    assert change_counts(rows) == (2, 1)


def test_pending_commands_settle_from_snapshot_rows_or_events():
    pending = PendingCommands()
    pin = {"id": "a", "command": "pin", "candidate": "c1", "amount": None}
    veto = {"id": "b", "command": "veto", "candidate": "c1", "amount": None}
    pending.add(pin)
    pending.add(veto)
    assert pending.for_candidate("c1") == ["pin", "veto"]
    assert pending.acknowledge(applied=[{"id": "zzz", "status": "applied"}]) == []
    [by_row] = pending.acknowledge(applied=[{"id": "a", "status": "applied", "message": ""}])
    assert by_row.describe() == "pin c1 applied"
    [by_event] = pending.acknowledge(
        events=[{"kind": "command_rejected", "command": "b", "message": "c1 is the best"}]
    )
    assert by_event.describe() == "veto c1 rejected: c1 is the best"
    assert len(pending) == 0


def test_poller_reports_only_what_changed(session):
    poller = SessionPoller(session)
    first = poller.poll(BEST)
    logged = len(session.events.read_text().splitlines())
    assert first.snapshot["session"] == NAME
    assert [e["seq"] for e in first.events] == list(range(logged))
    assert first.engine == EngineState("stopped")  # the run finished
    assert first.selection.target_ids == {"parent": BEST_PARENT, "best": BEST}
    assert "class Model" in first.selection.target_sources["reference"]

    quiet = poller.poll(BEST)
    assert (quiet.snapshot, quiet.events, quiet.engine, quiet.selection) == (None, [], None, None)

    with session.events.open("a") as log:
        log.write(json.dumps({"seq": logged, "ts": 0.0, "kind": "paused", "message": ""}) + "\n")
        log.write('{"seq": 999, "ts"')  # torn line: the engine is mid-write
    snapshot = json.loads(session.snapshot.read_text())
    snapshot["step"] += 1
    snapshot["engine_pid"] = os.getpid()  # published by the engine that holds the lock
    write_json_atomic(session.snapshot, snapshot)
    lock = EngineLock(session)  # the engine's own lock, taken by this process
    lock.acquire()
    try:
        later = poller.poll("c0001")
    finally:
        lock.release()
    assert later.snapshot["step"] == snapshot["step"]
    assert [e["seq"] for e in later.events] == [logged]
    assert later.engine == EngineState("running")
    assert later.selection.candidate_id == "c0001"
    assert later.selection.target_sources["parent"] is None  # a first-generation candidate
    assert poller.poll("c0001").engine == EngineState("stopped")


def test_status_line_says_interrupted_when_no_engine_holds_a_running_session(session):
    """A killed engine's last snapshot says running; the status line must not."""
    write_json_atomic(session.snapshot, {**read_snapshot(session), "state": "running"})
    changes = SessionPoller(session).poll(None)
    line = status_content(changes.snapshot, changes.engine, PendingCommands()).plain
    assert f"{NAME} matvec · sim · interrupted · step" in line
    assert "· running" not in line and "engine not running" in line


def test_export_writes_the_candidate_source_into_the_session_folder(session):
    target = export_candidate(session, BEST)
    assert target == session.root / f"{NAME}_{BEST}.py"
    source = target.read_text()
    assert "class ModelNew" in source and "@triton.jit" in source
    compile(source, str(target), "exec")
    with pytest.raises(ExportError, match="c9999"):
        export_candidate(session, "c9999")


def test_resume_starts_a_detached_process_that_logs_to_engine_log(session):
    send_command(session, "budget", amount="+2evals")  # its own is spent
    assert resume_command(session)[-5:] == [
        "resume",
        NAME,
        "--headless",
        "--sessions-dir",
        str(session.root.parent),
    ]
    process = start_detached_engine(session)
    try:
        assert os.getsid(process.pid) == process.pid  # its own session: outlives the TUI
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert "finished: budget spent" in session.log.read_text()  # the two evaluations added


def test_plot_steps_up_with_the_best_speedup():
    rows = best_speedup_plot([[0.0, 1.0], [5.0, 2.0], [10.0, 2.0]], width=27, height=2).split("\n")
    assert rows[0].startswith(" 2.00× ")
    top, bottom = rows[0][7:], rows[1][7:]
    assert top == " " * 9 + "█" * 11  # 2.00× from 5 GPU-seconds on
    assert bottom == "█" * 20  # 1.00× from the start: half the height
    assert rows[-1].endswith("10.0s GPU")
    assert best_speedup_plot([], 20, 2) == "no evaluations yet"


def test_attach_finds_a_session_by_name_or_names_the_choices(session, monkeypatch):
    monkeypatch.delenv("KERNELBRAIN_SESSIONS", raising=False)
    sessions_dir = str(session.root.parent)
    assert resolve_session(NAME, sessions_dir).root == session.root
    with pytest.raises(UsageError, match=f"no session 'nope'.*sessions there: {NAME}"):
        resolve_session("nope", sessions_dir)


def test_event_tail_reads_only_what_was_appended(tmp_path):
    """The TUI follows events.jsonl without re-parsing it: appends, a torn last line, and a
    rewrite by a resumed engine (a new file) that repeats events already seen."""
    from engine.session_files import EventTail, SessionPaths

    paths = SessionPaths(tmp_path)
    line = lambda seq: json.dumps({"seq": seq, "kind": "k"}) + "\n"  # noqa: E731
    tail = EventTail(paths)
    assert tail.read_new() == []
    paths.events.write_text(line(0) + line(1))
    assert [e["seq"] for e in tail.read_new()] == [0, 1]
    with paths.events.open("a") as fh:
        fh.write(line(2) + '{"seq": 3, "ki')  # the engine is mid-write
    assert [e["seq"] for e in tail.read_new()] == [2]
    with paths.events.open("a") as fh:
        fh.write('nd": "k"}\n')
    assert [e["seq"] for e in tail.read_new()] == [3]
    rewritten = tmp_path / "new.jsonl"
    rewritten.write_text(line(0) + line(1) + line(2) + line(3) + line(4))
    rewritten.replace(paths.events)
    assert [e["seq"] for e in tail.read_new()] == [4]


def test_status_line_says_what_failed_when_machine_faults_paused_the_search(session):
    reason = "3 evaluations in a row failed for the machine, not the candidate: the judge could"
    snapshot = {**read_snapshot(session), "state": "paused", "pause_reason": reason}
    line = status_content(snapshot, EngineState("running"), PendingCommands()).plain
    assert f"paused by machine faults: {reason}" in line
    paused_by_user = {**snapshot, "pause_reason": None}
    assert "machine" not in status_content(paused_by_user, EngineState("running"),
                                           PendingCommands()).plain  # fmt: skip
