"""The session folder as clients see it (docs/session-format.md). Imports neither torch nor
DuckDB: the TUI and the control commands use it while an engine owns the database."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CANDIDATE_COMMANDS = ("pin", "unpin", "veto")  # the commands that name a candidate
CONTROL_COMMANDS = (*CANDIDATE_COMMANDS, "pause", "unpause", "budget", "stop")


def sessions_root(override: str | None = None) -> Path:
    return Path(override or os.environ.get("KERNELBRAIN_SESSIONS") or "sessions")


@dataclass(frozen=True)
class SessionPaths:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def database(self) -> Path:
        return self.root / "state.duckdb"

    @property
    def lock(self) -> Path:
        return self.root / "engine.lock"

    @property
    def snapshot(self) -> Path:
        return self.root / "snapshot.json"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def inbox(self) -> Path:
        return self.root / "inbox"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates"

    @property
    def reference(self) -> Path:
        return self.root / "reference.py"

    @property
    def log(self) -> Path:
        return self.root / "engine.log"

    def candidate(self, candidate_id: str) -> Path:
        return self.candidates / f"{candidate_id}.json"


def write_json_atomic(path: Path, data) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    os.replace(tmp, path)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def send_command(
    paths: SessionPaths, command: str, candidate: str | None = None, amount: str | None = None
) -> dict:
    """Drop a control command into the session inbox; the engine applies it exactly once."""
    if command not in CONTROL_COMMANDS:
        raise ValueError(f"unknown command {command!r}; use one of {', '.join(CONTROL_COMMANDS)}")
    message = {
        "id": uuid.uuid4().hex,
        "command": command,
        "candidate": candidate,
        "amount": amount,
        "issued_at": time.time(),
    }
    paths.inbox.mkdir(parents=True, exist_ok=True)
    staged = paths.root / f".cmd-{message['id']}.json"
    staged.write_text(json.dumps(message))
    os.replace(staged, paths.inbox / f"{message['issued_at']:.6f}-{message['id']}.json")
    return message


def read_lock(paths: SessionPaths) -> dict | None:
    return read_json(paths.lock)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def engine_running(paths: SessionPaths) -> bool:
    """True while a live engine on this host holds the session's lock."""
    lock = read_lock(paths)
    if not lock:
        return False
    if lock.get("host") != socket.gethostname():
        # Another host's engine: trust a recent heartbeat.
        return time.time() - float(lock.get("heartbeat", 0)) < 60
    return pid_alive(int(lock.get("pid", 0)))


def read_snapshot(paths: SessionPaths) -> dict | None:
    return read_json(paths.snapshot)


def read_candidate(paths: SessionPaths, candidate_id: str) -> dict | None:
    return read_json(paths.candidate(candidate_id))


def read_events(paths: SessionPaths, after_seq: int = -1, limit: int | None = None) -> list[dict]:
    """Events with seq > after_seq (a torn last line, while being written, is skipped)."""
    events = []
    try:
        with paths.events.open() as fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if event.get("seq", -1) > after_seq:
                    events.append(event)
    except FileNotFoundError:
        return []
    return events[-limit:] if limit else events


class EventTail:
    """Follows events.jsonl: each read parses only what was appended since the last one. When
    the engine rewrites the file (on resume) it starts over, skipping events already seen."""

    def __init__(self, paths: SessionPaths):
        self.paths = paths
        self.inode: int | None = None
        self.offset = 0
        self.last_seq = -1

    def read_new(self) -> list[dict]:
        try:
            with self.paths.events.open("rb") as fh:
                stat = os.fstat(fh.fileno())
                if stat.st_ino != self.inode or stat.st_size < self.offset:
                    self.inode, self.offset = stat.st_ino, 0
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]  # a torn last line waits for the next read
        self.offset += len(complete)
        events = []
        for line in complete.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("seq", -1) > self.last_seq:
                events.append(event)
                self.last_seq = event["seq"]
        return events


def resume_command(paths: SessionPaths) -> list[str]:
    """The command line that resumes this session's engine, headless."""
    return [
        sys.executable,
        "-m",
        "engine.cli",
        "resume",
        paths.name,
        "--headless",
        "--sessions-dir",
        str(paths.root.parent),
    ]


def start_detached_engine(paths: SessionPaths) -> subprocess.Popen:
    """Resume the engine in its own process session, so it outlives the terminal (and SSH) and
    any TUI attached to it. Its output goes to the session's engine.log."""
    with paths.log.open("ab") as log:
        return subprocess.Popen(
            resume_command(paths),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class ExportError(Exception):
    """The candidate cannot be exported; the message says why."""


def exported_source(paths: SessionPaths, candidate_id: str) -> str:
    """A candidate as a standalone KernelBench file: its source behind a header that says
    where it comes from and how fast it was measured."""
    detail = read_candidate(paths, candidate_id)
    if detail is None or not detail.get("source"):
        raise ExportError(f"session {paths.name} has no candidate {candidate_id!r}")
    snap = read_snapshot(paths) or {}
    row = next((c for c in snap.get("candidates", []) if c["id"] == candidate_id), {})
    speed = f"{row['speedup']:.3f}x" if row.get("speedup") else "unmeasured"
    return (
        f"# KernelBrain candidate {candidate_id} for problem {snap.get('problem')} "
        f"(session {paths.name}, {detail['origin']}, speedup {speed} on {snap.get('backend')}).\n"
        "# A standalone KernelBench file: defines ModelNew.\n" + detail["source"]
    )
