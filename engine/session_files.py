"""The session folder as clients see it (docs/session-format.md). Imports neither torch nor
DuckDB: the TUI and the control commands use it while an engine owns the database."""

from __future__ import annotations

import ast
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from engine import settings
from engine.errors import KernelBrainError

# The session folder's vocabulary, for the engine that writes it and the clients that read it
# (docs/session-format.md; tests/test_session_contract.py holds the two together).
CANDIDATE_COMMANDS = ("pin", "unpin", "veto")  # the commands that name a candidate
CONTROL_COMMANDS = (*CANDIDATE_COMMANDS, "pause", "unpause", "budget", "stop")
COMMAND_STATUSES = ("applied", "rejected")  # what the engine made of a command
SEARCH_STATES = ("running", "paused", "stopped", "finished")  # the snapshot's "state"
INTERRUPTED = "interrupted"  # shown by clients, never written: see shown_state
# A candidate's status, in the order a list of candidates sorts by it.
CANDIDATE_STATUSES = ("evaluating", "queued", "alive", "done", "pruned", "rejected", "vetoed")
EVENT_KINDS = (
    "started",
    "resumed",
    "generated",
    "generation_rejected",
    "generation_note",
    "rejected",
    "evaluated",
    "rerun",
    "machine_fault",
    "reference_failed",
    "paused",
    "census",
    "fidelity",
    "promoted",
    "pruned",
    "command_applied",
    "command_rejected",
    "finished",
    "stopped",
)
# What a session's "best" is (engine.search.state.Search.best: the snapshot's `best`, what
# `export` writes and a headless run answers), in the words the help, `show`, the TUI and the
# README quote: a higher rung times more sizes, repetitions and input sets, so its ranking is
# the one trusted, and a score measured only lower can be higher without being confirmed.
BEST_MEANING = "the top score at the highest rung reached"
BEST_CAVEAT = "a row measured only at lower rungs may score higher"
# A session is one folder of the sessions folder: its name holds no separator and no `..`, and
# does not start with a dot (the engine stages hidden files beside its own).
SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SESSION_NAME_RULE = "letters, digits, '.', '_' and '-', starting with a letter or a digit"
LISTED_IN_ERRORS = 10  # session names a "no session" message lists, at most
# What a message suggests adding to a spent limit, by kind (engine.search.budget.LIMIT_KINDS);
# `{unit}` is the backend's word for device seconds (seconds_unit).
EXAMPLE_INCREASES = {
    "wall_seconds": "+10m",
    "gpu_seconds": "+300{unit}",
    "evaluations": "+100evals",
    "llm_usd": "'+$1'",
}
# The backend whose device is no GPU: what the ledger's gpu_seconds count there is the CPU's
# time running the Triton interpreter (sim simulates a GPU, so it keeps the GPU's words).
CPU_BACKEND = "cpu"


def device_word(backend: str | None) -> str:
    """What a session's evaluations hold while they run, as its output names it: "GPU", or
    "device" on the cpu backend. Stored fields keep their names (gpu_seconds)."""
    return "device" if backend == CPU_BACKEND else "GPU"


def seconds_unit(backend: str | None) -> str:
    """The unit of the ledger's gpu_seconds as a session's output writes it (and as --budget
    reads it): "gpu-s", or "device-s" on the cpu backend."""
    return f"{device_word(backend).lower()}-s"


def limit_name(kind: str, backend: str | None) -> str:
    """A budget kind (engine.search.budget.LIMIT_KINDS) as a session's output names it: the
    stored key, except gpu_seconds on the cpu backend, which is "device_seconds"."""
    if kind == "gpu_seconds":
        return f"{device_word(backend).lower()}_seconds"
    return kind


class SessionError(KernelBrainError):
    """A session name that is not allowed or names no session; the message says what to do."""


def sessions_root(override: str | None = None) -> Path:
    return Path(override or settings.value(settings.SESSIONS))


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


def checked_session_name(name: str) -> str:
    """`name`, if it is one plain folder name (SESSION_NAME); a SessionError says the rule."""
    if not SESSION_NAME.fullmatch(name):
        raise SessionError(
            f"session name {name!r} is not allowed: a session is one folder in the sessions "
            f"folder, named with {SESSION_NAME_RULE}"
        )
    return name


def new_session_paths(name: str, sessions_dir: str | None = None) -> SessionPaths:
    """Where a session called `name` lives (checked to be one plain folder name)."""
    return SessionPaths(sessions_root(sessions_dir) / checked_session_name(name))


def list_sessions(root: Path) -> list[SessionPaths]:
    """The sessions under `root`, by name; plain files and other folders there are skipped."""
    if not root.is_dir():
        return []
    folders = (SessionPaths(p) for p in sorted(root.iterdir()) if p.is_dir())
    return [paths for paths in folders if paths.database.is_file()]


def find_session(
    name: str, sessions_dir: str | None = None, published: bool = False
) -> SessionPaths:
    """The existing session `name`; a SessionError names the folder looked in and its sessions.
    `published`: a session whose database is gone will do, for the commands that read only
    what it published (export, attach)."""
    paths = new_session_paths(name, sessions_dir)
    if paths.database.is_file() or (published and paths.snapshot.is_file()):
        return paths
    if paths.snapshot.is_file():
        raise SessionError(
            f"session {name} has lost its database ({paths.database} is gone): it cannot go on "
            f"or be shown; {damaged_session_hint(name)}"
        )
    root = paths.root.parent
    raise SessionError(
        f"no session {name!r} in {root}/ ({what_is_in(root)}); `kernelbrain ls` lists the "
        "sessions, --sessions-dir or KERNELBRAIN_SESSIONS looks in another folder"
    )


def damaged_session_hint(name: str) -> str:
    """What is left to do with a session whose database is gone or damaged."""
    return (
        f"what it published is still there: `kernelbrain export {name}` writes its best "
        f"candidate, `kernelbrain attach {name}` shows it"
    )


def what_is_in(root: Path) -> str:
    """The sessions under `root`, in words, for a message."""
    if not root.is_dir():
        return "that folder does not exist"
    names = [paths.name for paths in list_sessions(root)]
    if not names:
        return "there are no sessions there"
    listed, more = ", ".join(names[:LISTED_IN_ERRORS]), len(names) - LISTED_IN_ERRORS
    return f"sessions there: {listed}" + (f" and {more} more" if more > 0 else "")


def write_json_atomic(path: Path, data) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    write_text_atomic(path, json.dumps(data, separators=(",", ":")))


def write_text_atomic(path: Path, text: str) -> None:
    """write_json_atomic for text encoded already."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
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


def read_inbox(paths: SessionPaths) -> list[dict]:
    """The commands waiting in the inbox, oldest first (the engine has not applied them yet)."""
    files = sorted(paths.inbox.glob("*.json")) if paths.inbox.is_dir() else []
    return [command for command in map(read_json, files) if command]


def spent_budget_message(paths: SessionPaths) -> str | None:
    """Why resuming now would stop at once: a limit is spent and no budget command waits in the
    inbox (what one adds is the engine's to judge); None when there is budget to go on with, or
    when the search's end was cut short with the composite of its per-shape winners planned
    (timed beyond the budget, as the answer's census is)."""
    snapshot = read_snapshot(paths)
    if snapshot is None or any(c.get("command") == "budget" for c in read_inbox(paths)):
        return None
    planned = [c for c in snapshot["candidates"] if c["status"] == "evaluating"]
    if any(c["origin"] == "composite" for c in planned):
        return None
    budget = snapshot["budget"]
    spent = [kind for kind, left in budget["left"].items() if left is not None and left <= 0]
    if not spent:
        return None
    kind, backend = spent[0], snapshot.get("backend")
    increase = EXAMPLE_INCREASES[kind].format(unit=seconds_unit(backend))
    return (
        f"session {paths.name} has spent its {limit_name(kind, backend)} limit of "
        f"{budget['limits'][kind]:g}: add budget first, e.g. `kernelbrain budget {paths.name} "
        f"{increase}`, then resume"
    )


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


def shown_state(stored_state: str, engine_alive: bool) -> str:
    """The state a client shows: a search stored as running or paused that no live engine holds
    was interrupted (killed, Ctrl-C, a lost machine), and `kernelbrain resume` continues it."""
    if stored_state in ("running", "paused") and not engine_alive:
        return INTERRUPTED
    return stored_state


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


class ExportError(KernelBrainError):
    """The candidate cannot be exported; the message says why."""


# Ahead of an exported candidate's code: where no GPU is, Triton's interpreter runs its kernels
# on the CPU. Triton reads the switch as each kernel is defined, so importing triton first is fine.
RUN_ANYWHERE = """import os as _os

import torch as _torch

if not _torch.cuda.is_available():  # no GPU here: Triton's interpreter, on the CPU (slowly)
    _os.environ.setdefault("TRITON_INTERPRET", "1")

"""


def _after_future_imports(source: str, code: str) -> str:
    """`source` with `code` after its `from __future__` imports, which must come first."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return code + source
    futures = [n for n in body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    if not futures:
        return code + source
    lines = source.splitlines(keepends=True)
    end = futures[-1].end_lineno
    return "".join(lines[:end]) + "\n" + code + "".join(lines[end:])


def exported_source(paths: SessionPaths, candidate_id: str) -> str:
    """A candidate as a standalone KernelBench file: its source behind a header that says
    where it comes from and how fast it was measured, and that runs it through Triton's
    interpreter where the machine has no GPU."""
    detail = read_candidate(paths, candidate_id)
    if detail is None or not detail.get("source"):
        raise ExportError(f"session {paths.name} has no candidate {candidate_id!r}")
    snap = read_snapshot(paths) or {}
    row = next((c for c in snap.get("candidates", []) if c["id"] == candidate_id), {})
    speed = f"{row['speedup']:.3f}x" if row.get("speedup") else "unmeasured"
    allowed = snap.get("allowed_torch_ops")
    hybrid = f"# Hybrid: forward computes with torch {', '.join(allowed)}.\n" if allowed else ""
    return (
        f"# KernelBrain candidate {candidate_id} for problem {snap.get('problem')} "
        f"(session {paths.name}, {detail['origin']}, speedup {speed} on {snap.get('backend')}).\n"
        "# A standalone KernelBench file: defines ModelNew. On a GPU it runs at full speed; on a\n"
        "# machine without one, Triton's interpreter runs it on the CPU (chosen below).\n"
        + hybrid
        + _after_future_imports(detail["source"], RUN_ANYWHERE)
    )
