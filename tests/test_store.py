"""The session store on real DuckDB files: atomic steps, schema versions, bad files, the lock."""

import json
import subprocess
import sys

import duckdb
import pytest

from engine.compose import resume_session
from engine.jobs import RungSpec
from engine.problems import load_problem
from engine.records import Candidate
from engine.session.lock import EngineLock, SessionBusy
from engine.session.settings import SessionSettings
from engine.session.store import SCHEMA, ReplyTable, StepWrite, Store, StoreError
from engine.session_files import SessionPaths

SETTINGS = SessionSettings("softmax", "sim", seed=3, ladder=(RungSpec(0, ("full1",), 1, 3),))


def candidate(seq):
    return Candidate(
        id=f"c{seq:04d}",
        seq=seq,
        sha256=f"h{seq}",
        parent=None,
        origin="s",
        params={"BLOCK": 64},
        note="n",
        source="src",
        created_step=0,
    )


def test_step_round_trip(tmp_path):
    store = Store.create(tmp_path / "s.duckdb", SETTINGS)
    c = candidate(1)
    store.commit(
        StepWrite(
            candidates=[c],
            state={"search": {"step": 1}},
            events=[
                {
                    "seq": 0,
                    "ts": 1.0,
                    "step": 0,
                    "kind": "generated",
                    "message": "m",
                    "candidate": c.id,
                }
            ],
        )
    )
    c.status = "alive"
    store.commit(StepWrite(candidates=[c], evaluations=[(c.id, 0, 1, True, {"passed": True})]))
    store.close()
    again = Store(tmp_path / "s.duckdb")
    assert again.settings() == SETTINGS
    assert [x.status for x in again.candidates()] == ["alive"]
    assert again.evaluations(c.id) == [{"rung": 0, "passed": True}]
    assert again.state()["search"] == {"step": 1}
    assert again.events()[0]["kind"] == "generated"


def test_failed_step_leaves_nothing(tmp_path):
    store = Store.create(tmp_path / "s.duckdb", SETTINGS)
    command = {"id": "x", "command": "pause", "status": "applied"}
    store.commit(StepWrite(commands=[command]))
    bad = StepWrite(candidates=[candidate(1)], commands=[command])  # the same command twice
    with pytest.raises(duckdb.ConstraintException):
        store.commit(bad)
    assert store.candidates() == []
    assert len(store.commands()) == 1


def test_other_schema_version_is_refused_with_advice(tmp_path):
    path = tmp_path / "s.duckdb"
    Store.create(path, SETTINGS).close()
    db = duckdb.connect(str(path))
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(StoreError, match="schema version 99.*new session"):
        Store(path)


def test_corrupt_file_is_refused_with_advice(tmp_path):
    path = tmp_path / "s.duckdb"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="corrupt|not a"):
        Store(path)


def test_replies_are_committed_at_once(tmp_path):
    store = Store.create(tmp_path / "s.duckdb", SETTINGS)
    ReplyTable(store).put("abc", {"text": "hi"})
    store.close()
    assert ReplyTable(Store(tmp_path / "s.duckdb")).get("abc") == {"text": "hi"}


def old_session(root, **dropped):
    """A session file as KernelBrain wrote it before its settings had a type: the meta table's
    rows, one JSON value a key, written straight into DuckDB (`dropped` leaves keys out)."""
    softmax = load_problem("softmax")
    smallest = softmax.full[0].label
    meta = {
        "session": "old", "problem": "softmax", "problem_path": str(softmax.path),
        "backend": "sim", "generator": "offline", "model": None, "api_base": None,
        "replay_from": None, "seed": 4, "precision_policy": "strict", "allowed_torch_ops": [],
        "gpus": [0], "ray": None, "limits": {"evaluations": 12},
        "ladder": [
            {"index": 0, "size_labels": [smallest], "warmup": 3, "reps": 10, "input_sets": 2,
             "interleave": True, "profile": False, "check_seeds": 3},
            {"index": 1, "size_labels": [smallest], "warmup": 5, "reps": 30, "input_sets": 3,
             "interleave": True, "profile": True, "check_seeds": 3},
        ],
        "created_at": 1764480000.0, "schema_version": 1,
    }  # fmt: skip
    paths = SessionPaths(root / "old")
    paths.root.mkdir()
    db = duckdb.connect(str(paths.database))
    db.execute(SCHEMA)
    rows = [(k, json.dumps(v)) for k, v in meta.items() if k not in dropped]
    db.executemany("INSERT INTO meta VALUES (?, ?)", rows)
    db.close()
    return paths, meta


@pytest.mark.parametrize(
    "dropped",
    [{}, {"precision_policy": "strict", "allowed_torch_ops": [], "gpus": [0], "ray": None}],
    ids=["now", "older"],
)
def test_sessions_written_before_settings_had_a_type_still_load_and_run(tmp_path, dropped):
    paths, meta = old_session(tmp_path, **dropped)
    engine = resume_session(paths)
    try:
        assert engine.run() == "finished"
        snapshot = engine.last_snapshot
    finally:
        engine.store.close()
    settings = Store(paths.database, read_only=True).settings()
    assert (settings.problem, settings.seed, settings.limits) == ("softmax", 4, {"evaluations": 12})
    assert (settings.precision_policy, settings.allowed_torch_ops) == ("strict", ())
    assert settings.ladder[1] == RungSpec(1, (meta["ladder"][1]["size_labels"][0],), 5, 30, 3,
                                          profile=True)  # fmt: skip
    assert snapshot["ledger"]["evaluations"] == 12 and snapshot["precision_policy"] == "strict"
    assert all(rung.precision == 0.0 for rung in settings.ladder)  # every repetition, as then
    # and what a new session writes is that format still: the same keys and values, and each
    # rung's precision (engine.timing.sequential), added since
    again = tmp_path / "again.duckdb"
    Store.create(again, settings).close()
    db = duckdb.connect(str(again), read_only=True)
    written = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta").fetchall()}
    assert written == {**meta, "ladder": [{**r, "precision": 0.0} for r in meta["ladder"]]}


LOCK_HOLDER = """
import sys, time
from pathlib import Path
from engine.session.lock import EngineLock
from engine.session_files import SessionPaths
EngineLock(SessionPaths(Path(sys.argv[1]))).acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_second_engine_refused_and_stale_lock_taken_over(tmp_path):
    paths = SessionPaths(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(SessionBusy, match=f"pid {holder.pid}.*kernelbrain stop"):
        EngineLock(paths).acquire()
    holder.kill()
    holder.wait()
    assert json.loads(paths.lock.read_text())["pid"] == holder.pid  # left behind by the kill
    lock = EngineLock(paths)
    assert lock.acquire() is True  # stale: taken over
    lock.release()
