"""What changed in a session folder since the last look: the I/O half of the file watcher.

The app's watcher thread calls `SessionPoller.poll` about four times a second; this module
knows nothing of Textual, so it is tested on its own."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.session_files import (
    EventTail,
    SessionPaths,
    engine_running,
    read_candidate,
    read_snapshot,
)

# Targets the Diff pane compares the selected candidate against, in the order `d` cycles.
DIFF_TARGETS = ("parent", "best", "reference")


def file_signature(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size): changes whenever the engine renames a new version into place."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


@dataclass(frozen=True)
class Selection:
    """The selected candidate's detail file and the sources its diff can compare against."""

    candidate_id: str
    detail: dict | None
    target_ids: dict[str, str | None]  # "parent"/"best" -> candidate id
    target_sources: dict[str, str | None]  # "parent"/"best"/"reference" -> source


@dataclass
class SessionChanges:
    """One poll's news; None (or empty) where nothing changed."""

    snapshot: dict | None = None
    events: list[dict] = field(default_factory=list)
    running: bool | None = None
    selection: Selection | None = None

    def __bool__(self) -> bool:
        """Whether there is any news."""
        news = (self.snapshot, self.running, self.selection)
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
        self._running: bool | None = None
        self._events = EventTail(paths)
        self._best_id: str | None = None

    def poll(self, selected_id: str | None) -> SessionChanges:
        changes = SessionChanges()
        signature = file_signature(self.paths.snapshot)
        if signature != self._snapshot_signature:
            snapshot = read_snapshot(self.paths)
            if snapshot is not None:
                self._snapshot_signature = signature
                self._best_id = (snapshot.get("best") or {}).get("id")
                changes.snapshot = snapshot
        signature = file_signature(self.paths.events)
        if signature != self._events_signature:
            self._events_signature = signature
            changes.events = self._events.read_new()
        running = engine_running(self.paths)
        if running != self._running:
            self._running = changes.running = running
        if selected_id is not None:
            changes.selection = self._poll_selection(selected_id)
        return changes

    def _poll_selection(self, candidate_id: str) -> Selection | None:
        detail_key = (candidate_id, file_signature(self.paths.candidate(candidate_id)))
        if detail_key != self._detail_key:
            self._detail_key = detail_key
            self._detail = read_candidate(self.paths, candidate_id)
        target_ids = {"parent": (self._detail or {}).get("parent"), "best": self._best_id}
        watched = [self.paths.reference] + [
            self.paths.candidate(i) for i in target_ids.values() if i
        ]
        signature = (detail_key, tuple(target_ids.values()), *map(file_signature, watched))
        if signature == self._selection_signature:
            return None
        self._selection_signature = signature
        sources = {
            name: (read_candidate(self.paths, other) or {}).get("source") if other else None
            for name, other in target_ids.items()
        }
        try:
            sources["reference"] = self.paths.reference.read_text()
        except FileNotFoundError:
            sources["reference"] = None
        return Selection(candidate_id, self._detail, target_ids, sources)
