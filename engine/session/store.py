"""The session's DuckDB file: every step commits one transaction holding all that is needed to
continue. Only the engine that holds the session lock opens it for writing."""

from __future__ import annotations

import json
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from engine.errors import KernelBrainError
from engine.records import Candidate, shape_result
from engine.session.settings import SessionSettings
from engine.session_files import SessionPaths, damaged_session_hint

SCHEMA_VERSION = 1
SCHEMA = (Path(__file__).with_name("schema.sql")).read_text()
COMMAND_COLUMNS = (
    "id",
    "command",
    "candidate",
    "amount",
    "issued_at",
    "applied_at",
    "step",
    "status",
    "message",
)
EVENT_COLUMNS = ("seq", "ts", "step", "kind", "message", "candidate", "command")


class StoreError(KernelBrainError):
    """The session file cannot be used; the message says why and what to do."""


@dataclass
class StepWrite:
    """Everything one step changes, written in one transaction."""

    candidates: list[Candidate] = field(default_factory=list)
    evaluations: list[tuple[str, int, int, bool, dict]] = field(default_factory=list)
    state: dict[str, object] = field(default_factory=dict)
    commands: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


@contextmanager
def interrupts_deferred():
    """Hold a Ctrl-C until the block ends, then deliver it: DuckDB would cut the statement it
    runs short with a RuntimeError instead. Only the main thread handles signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *_: caught.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)


# A step writes a few rows in eight small statements: a second thread only adds scheduling to
# each (commits 16.5 -> 14.5 ms median at 10,000 candidates, interleaved in one process).
DUCKDB_CONFIG = {"threads": 1}


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only, config=DUCKDB_CONFIG)
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise StoreError(
                f"{path} is in use by another process ({text.splitlines()[0]}); "
                "stop that engine (kernelbrain stop) or wait for it to finish"
            ) from exc
        raise StoreError(f"cannot open {path}: {text}{_published_hint(path)}") from exc
    except duckdb.Error as exc:
        raise StoreError(
            f"{path} is not a readable KernelBrain session ({exc}); it may be corrupt"
            f"{_published_hint(path)}"
        ) from exc


def _published_hint(database: Path) -> str:
    """Where the session has published a snapshot, what is left to do with it."""
    paths = SessionPaths(database.parent)
    return f"; {damaged_session_hint(paths.name)}" if paths.snapshot.is_file() else ""


class Store:
    def __init__(self, path: Path, read_only: bool = False):
        self.path = path
        self.db = _connect(path, read_only)
        self._check_schema()

    @classmethod
    def create(cls, path: Path, settings: SessionSettings) -> Store:
        """Write a new session file; it appears complete or not at all (built aside, renamed)."""
        if path.exists():
            raise StoreError(f"{path} exists already: resume that session or choose another name")
        staging = path.with_name(f".{path.name}.new")
        staging.unlink(missing_ok=True)
        db = _connect(staging, read_only=False)
        try:
            db.execute(SCHEMA)
            rows = {**settings.to_meta(), "schema_version": SCHEMA_VERSION}
            db.executemany(
                "INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in rows.items()]
            )
        finally:
            db.close()
        staging.replace(path)
        return cls(path)

    def _check_schema(self) -> None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.Error as exc:
            self.db.close()
            raise StoreError(f"{self.path} is not a KernelBrain session file ({exc})") from exc
        version = json.loads(row[0]) if row else None
        if version != SCHEMA_VERSION:
            self.db.close()
            raise StoreError(
                f"{self.path} has session schema version {version}, this KernelBrain reads "
                f"version {SCHEMA_VERSION}: open it with the KernelBrain that made it, "
                "or start a new session"
            )

    def close(self) -> None:
        self.db.close()

    # reads
    def settings(self) -> SessionSettings:
        rows = self.db.execute("SELECT key, value FROM meta").fetchall()
        return SessionSettings.from_meta({k: json.loads(v) for k, v in rows})

    def state(self) -> dict:
        return {
            k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM state").fetchall()
        }

    def candidates(self) -> list[Candidate]:
        rows = self.db.execute("SELECT record FROM candidates ORDER BY seq").fetchall()
        candidates = [Candidate.from_row(json.loads(r[0])) for r in rows]
        if any(not r.shapes for c in candidates for r in c.results.values()):
            self._fill_shapes(candidates)
        return candidates

    def _fill_shapes(self, candidates: list[Candidate]) -> None:
        """Per-shape results of a session stored before they were kept, from the timings of
        its evaluations (one passed evaluation per candidate and rung)."""
        rows = self.db.execute(
            "SELECT candidate, rung, result FROM evaluations WHERE passed ORDER BY step"
        ).fetchall()
        timings = {(cid, rung): json.loads(result)["timings"] for cid, rung, result in rows}
        for c in candidates:
            for rung, result in c.results.items():
                if not result.shapes:
                    found = timings.get((c.id, rung), [])
                    result.shapes = {
                        t["size_label"]: shape_result(t["speedup"], *t["speedup_ci"]) for t in found
                    }

    def evaluations(self, candidate_id: str) -> list[dict]:
        rows = self.db.execute(
            "SELECT rung, result FROM evaluations WHERE candidate = ? ORDER BY step",
            [candidate_id],
        ).fetchall()
        return [{"rung": rung, **json.loads(result)} for rung, result in rows]

    def evaluated_since(self, step: int) -> list[str]:
        rows = self.db.execute(
            "SELECT DISTINCT candidate FROM evaluations WHERE step >= ? ORDER BY candidate", [step]
        ).fetchall()
        return [r[0] for r in rows]

    def evaluations_by_device(self, except_origin: str) -> dict[str, int]:
        """How many evaluations each device ran (one stored before devices counted: device 0),
        those of candidates of `except_origin` aside."""
        rows = self.db.execute(
            "SELECT coalesce(CAST(e.result->>'device' AS INTEGER), 0) AS device, count(*) "
            "FROM evaluations e JOIN candidates c ON c.id = e.candidate "
            "WHERE c.record->>'origin' != ? GROUP BY device ORDER BY device",
            [except_origin],
        ).fetchall()
        return {str(device): count for device, count in rows}

    def commands(self) -> list[dict]:
        cols = COMMAND_COLUMNS
        rows = self.db.execute(
            f"SELECT {', '.join(cols)} FROM commands ORDER BY applied_at, id"
        ).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def events(self, after_seq: int = -1) -> list[dict]:
        cols = EVENT_COLUMNS
        rows = self.db.execute(
            f"SELECT {', '.join(cols)} FROM events WHERE seq > ? ORDER BY seq", [after_seq]
        ).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    # writes
    def _insert(self, table: str, rows: list[tuple]) -> None:
        """One multi-row INSERT: DuckDB's executemany costs a statement per row."""
        if rows:
            row = f"({', '.join('?' * len(rows[0]))})"
            params = [value for r in rows for value in r]
            self.db.execute(f"INSERT INTO {table} VALUES {', '.join([row] * len(rows))}", params)

    def _delete(self, table: str, column: str, keys: list) -> None:
        if keys:
            marks = ", ".join("?" * len(keys))
            self.db.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", keys)

    def commit(self, write: StepWrite) -> None:
        """Write one step atomically: all of it or, if the process dies, none of it."""
        # A candidate changed twice in one step (generated, then popped) is written once.
        candidates = list({c.id: c for c in write.candidates}.values())
        with interrupts_deferred():
            self._write_step(write, candidates)

    def _write_step(self, write: StepWrite, candidates: list[Candidate]) -> None:
        self.db.execute("BEGIN")
        try:
            self._delete("candidates", "id", [c.id for c in candidates])
            self._insert(
                "candidates",
                [
                    (c.id, c.seq, c.sha256, c.status, c.rung, c.score, json.dumps(c.to_row()))
                    for c in candidates
                ],
            )
            self._insert(
                "evaluations",
                [(c, r, s, p, json.dumps(res)) for c, r, s, p, res in write.evaluations],
            )
            self._delete("state", "key", list(write.state))
            self._insert("state", [(k, json.dumps(v)) for k, v in write.state.items()])
            self._insert(
                "commands",
                [
                    tuple(c.get(k) for k in COMMAND_COLUMNS[:-1]) + (c.get("message", ""),)
                    for c in write.commands
                ],
            )
            self._insert("events", [tuple(e.get(k) for k in EVENT_COLUMNS) for e in write.events])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise


class ReplyTable:
    """engine.generate.base.ReplyStore on the session file: each reply committed at once. The
    LLM generator calls it from several threads: they share one cursor, one at a time."""

    def __init__(self, store: Store):
        self.cursor = store.db.cursor()
        self.lock = threading.Lock()

    def get(self, prompt_sha256: str) -> dict | None:
        with self.lock:
            row = self.cursor.execute(
                "SELECT reply FROM replies WHERE prompt_sha256 = ?", [prompt_sha256]
            ).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, prompt_sha256: str, reply: dict) -> None:
        with self.lock:
            self.cursor.execute(
                "INSERT OR REPLACE INTO replies VALUES (?, ?)", [prompt_sha256, json.dumps(reply)]
            )
