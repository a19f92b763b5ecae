"""What changed in a session folder since the last look: the I/O half of the file watcher.

The app's watcher thread calls `SessionPoller.poll` about four times a second; this module
knows nothing of Textual, so it is tested on its own."""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from engine.session_files import (
    EventTail,
    SessionPaths,
    engine_running,
    read_candidate,
    read_lock,
    read_snapshot,
)

# Targets the Diff pane compares the selected candidate against, in the order `d` cycles.
DIFF_TARGETS = ("parent", "best", "reference")


def next_diff_target(target: str) -> str:
    """What `d` diffs against after `target`."""
    return DIFF_TARGETS[(DIFF_TARGETS.index(target) + 1) % len(DIFF_TARGETS)]


def file_signature(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size): changes whenever the engine renames a new version into place."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


def last_line(path: Path, offset: int = 0) -> str | None:
    """The last line with text in a log file after byte `offset` (an error's one-line reason)."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            lines = log.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    return next((line.strip() for line in reversed(lines) if line.strip()), None)


@dataclass(frozen=True)
class EngineState:
    """The session's engine as a client sees it."""

    phase: str  # "running"; "starting": no snapshot from it yet; or "stopped"
    failure: str | None = None  # why the engine this client started last exited with an error


@dataclass(frozen=True)
class Selection:
    """The selected candidate's detail file and the sources its diff can compare against."""

    candidate_id: str
    detail: dict | None
    target_ids: dict[str, str | None]  # "parent"/"best" -> candidate id
    target_sources: dict[str, str | None]  # "parent"/"best"/"reference" -> source
    profiled_on: str | None = None  # the candidate whose profile stands for this one
    profile: dict | None = None


@dataclass
class SessionChanges:
    """One poll's news; None (or empty) where nothing changed."""

    snapshot: dict | None = None
    events: list[dict] = field(default_factory=list)
    engine: EngineState | None = None
    selection: Selection | None = None

    def __bool__(self) -> bool:
        """Whether there is any news."""
        news = (self.snapshot, self.engine, self.selection)
        return bool(self.events) or any(item is not None for item in news)


class SessionPoller:
    """Rereads a session file only when its signature changed since the previous poll."""

    def __init__(self, paths: SessionPaths) -> None:
        self.paths = paths
        self._snapshot_signature: tuple[int, int] | None = None
        self._events_signature: tuple[int, int] | None = None
        self._selection_signature: tuple | None = None
        self._detail_key: tuple | None = None
        self._detail: dict | None = None
        self._engine: EngineState | None = None
        self._engine_pid: int | None = None  # of the engine that published the last snapshot
        self._started: subprocess.Popen | None = None  # an engine this client started
        self._earlier: list[subprocess.Popen] = []  # ones started before it, still to be reaped
        self._log_offset = 0  # engine.log's size when the engine was started: its own lines follow
        self._started_lock = threading.Lock()  # the app's thread hands it to the watcher's
        self._failure: str | None = None
        self._events = EventTail(paths)
        self._best_id: str | None = None
        self._rows: list[dict] = []  # the last snapshot's candidates
        self._snapshots = 0  # snapshots read so far
        self._strategy_profiles: dict[str, str] = {}  # origin -> the candidate profiled for it
        self._searched_in_vain: dict[str, int] = {}  # origin -> snapshot count when last searched

    def follow(self, process: subprocess.Popen) -> None:
        """Follow an engine this client started: "starting" until it publishes, and its error
        if it exits with one (waiting for it, so it never lingers as a zombie)."""
        with self._started_lock:
            if self._started is not None:
                self._earlier.append(self._started)  # still to be waited for
            self._started, self._failure = process, None
            self._log_offset = self.paths.log.stat().st_size if self.paths.log.exists() else 0
            self._engine = None  # whatever comes next is news, even the state before it

    def poll(self, selected_id: str | None) -> SessionChanges:
        changes = SessionChanges()
        signature = file_signature(self.paths.snapshot)
        if signature != self._snapshot_signature:
            snapshot = read_snapshot(self.paths)
            if snapshot is not None:
                self._snapshot_signature = signature
                self._best_id = (snapshot.get("best") or {}).get("id")
                self._engine_pid = snapshot.get("engine_pid")
                self._rows, self._snapshots = snapshot.get("candidates") or [], self._snapshots + 1
                changes.snapshot = snapshot
        signature = file_signature(self.paths.events)
        if signature != self._events_signature:
            self._events_signature = signature
            changes.events = self._events.read_new()
        engine = self._engine_state()
        if engine != self._engine:
            self._engine = changes.engine = engine
        if selected_id is not None:
            changes.selection = self._poll_selection(selected_id)
        return changes

    def _engine_state(self) -> EngineState:
        with self._started_lock:
            self._earlier = [p for p in self._earlier if p.poll() is None]  # no zombies
            started = self._started
            if started is not None and started.poll() is not None:  # waited for: no zombie
                code = started.returncode
                if code != 0:  # its own words from this run, or how it ended
                    ended = f"killed by signal {-code}" if code < 0 else f"exit {code}"
                    self._failure = last_line(self.paths.log, self._log_offset) or ended
                self._started = started = None
            if engine_running(self.paths):
                self._failure = None
                published = (read_lock(self.paths) or {}).get("pid") == self._engine_pid
                return EngineState("running" if published else "starting")
            if started is not None and started.pid != self._engine_pid:  # nothing published yet
                return EngineState("starting")
            return EngineState("stopped", self._failure)

    def _poll_selection(self, candidate_id: str) -> Selection | None:
        detail_key = (candidate_id, file_signature(self.paths.candidate(candidate_id)))
        if detail_key != self._detail_key:
            self._detail_key = detail_key
            self._detail = read_candidate(self.paths, candidate_id)
        detail = self._detail or {}
        target_ids = {"parent": detail.get("parent"), "best": self._best_id}
        if detail.get("profile"):
            profiled_on = candidate_id
        else:
            profiled_on = self._strategy_profiled_on(detail.get("origin"))
        others = [*target_ids.values(), profiled_on if profiled_on != candidate_id else None]
        watched = [self.paths.reference] + [self.paths.candidate(i) for i in others if i]
        signature = (detail_key, *others, *map(file_signature, watched))
        if signature == self._selection_signature:
            return None
        self._selection_signature = signature
        if profiled_on in (None, candidate_id):
            profile = detail.get("profile")
        else:
            profile = (read_candidate(self.paths, profiled_on) or {}).get("profile")
        sources = {
            name: (read_candidate(self.paths, other) or {}).get("source") if other else None
            for name, other in target_ids.items()
        }
        try:
            sources["reference"] = self.paths.reference.read_text()
        except FileNotFoundError:
            sources["reference"] = None
        return Selection(candidate_id, self._detail, target_ids, sources, profiled_on, profile)

    def _strategy_profiled_on(self, origin: str | None) -> str | None:
        """The one candidate of a strategy that the engine profiled (it profiles each strategy
        once, on a candidate at rung 1 or above), looked for again only in a newer snapshot."""
        if origin is None or origin in self._strategy_profiles:
            return self._strategy_profiles.get(origin)
        if self._searched_in_vain.get(origin) == self._snapshots:
            return None
        self._searched_in_vain[origin] = self._snapshots
        climbed = [r["id"] for r in self._rows if r.get("origin") == origin and r.get("rung")]
        for candidate_id in sorted(climbed):
            if (read_candidate(self.paths, candidate_id) or {}).get("profile"):
                self._strategy_profiles[origin] = candidate_id
                return candidate_id
        return None
