"""The session store on real DuckDB files: atomic steps, schema versions, bad files, the lock."""

import json
import subprocess
import sys

import duckdb
import pytest

from engine.records import Candidate
from engine.session.lock import EngineLock, SessionBusy
from engine.session.store import ReplyTable, StepWrite, Store, StoreError
from engine.session_files import SessionPaths


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
    store = Store.create(tmp_path / "s.duckdb", {"problem": "softmax", "seed": 3})
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
    assert again.meta()["seed"] == 3
    assert [x.status for x in again.candidates()] == ["alive"]
    assert again.evaluations(c.id) == [{"rung": 0, "passed": True}]
    assert again.state()["search"] == {"step": 1}
    assert again.events()[0]["kind"] == "generated"


def test_failed_step_leaves_nothing(tmp_path):
    store = Store.create(tmp_path / "s.duckdb", {})
    command = {"id": "x", "command": "pause", "status": "applied"}
    store.commit(StepWrite(commands=[command]))
    bad = StepWrite(candidates=[candidate(1)], commands=[command])  # the same command twice
    with pytest.raises(duckdb.ConstraintException):
        store.commit(bad)
    assert store.candidates() == []
    assert len(store.commands()) == 1


def test_other_schema_version_is_refused_with_advice(tmp_path):
    path = tmp_path / "s.duckdb"
    Store.create(path, {}).close()
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
    store = Store.create(tmp_path / "s.duckdb", {})
    ReplyTable(store).put("abc", {"text": "hi"})
    store.close()
    assert ReplyTable(Store(tmp_path / "s.duckdb")).get("abc") == {"text": "hi"}


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
