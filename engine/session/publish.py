"""What the engine publishes for clients after each step (docs/session-format.md)."""

from __future__ import annotations

import json
import time

from engine.records import Candidate
from engine.session_files import (
    CANDIDATE_STATUSES,
    COMMAND_STATUSES,
    EVENT_KINDS,
    SEARCH_STATES,
    SessionPaths,
    read_json,
    write_json_atomic,
    write_text_atomic,
)

SNAPSHOT_SCHEMA = 1
SNAPSHOT_ROWS = 500  # the TUI shows the best, the queue, the pinned and the recent: enough


def candidate_row(c: Candidate) -> dict:
    best = c.best_result
    return {
        "id": c.id,
        "sha256": c.sha256,
        "parent": c.parent,
        "origin": c.origin,
        "rung": c.rung,
        "status": c.status,
        "score": None if best is None else round(best.score, 6),
        "speedup": None if best is None else round(best.speedup, 6),
        "speedup_ci": None if best is None else [round(best.low, 6), round(best.high, 6)],
        "cv": None if best is None else round(best.cv, 6),
        "pinned": c.pinned,
        "vetoed": c.vetoed,
        "reason": c.reason,
        "note": c.note,
        "precision": c.precision,
    }


SEPARATORS = (",", ":")


class SnapshotRows:
    """The snapshot's candidate rows, each kept with its JSON until a step changes its candidate:
    a step changes a few candidates, while the snapshot lists up to SNAPSHOT_ROWS of them."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[dict, str]] = {}

    def changed(self, candidates: list[Candidate]) -> None:
        """Forget the rows of `candidates` (those a step committed)."""
        for c in candidates:
            self._kept.pop(c.id, None)

    def rows(self, candidates: list[Candidate]) -> list[dict]:
        """The rows of `candidates`, in order; only these are kept from now on."""
        kept = {}
        for c in candidates:
            kept[c.id] = self._kept.get(c.id) or _encoded_row(c)
        self._kept = kept
        return [row for row, _ in kept.values()]

    def encoded(self) -> list[str]:
        """The JSON of the rows that `rows` last returned, in the same order."""
        return [text for _, text in self._kept.values()]


def _encoded_row(c: Candidate) -> tuple[dict, str]:
    row = candidate_row(c)
    return row, json.dumps(row, separators=SEPARATORS)


def candidate_detail(c: Candidate, evaluations: list[dict]) -> dict:
    return {
        "id": c.id,
        "parent": c.parent,
        "origin": c.origin,
        "params": c.params,
        "note": c.note,
        "source": c.source,
        "evaluations": evaluations,
        "profile": c.profile,
    }


def write_candidate_details(
    paths: SessionPaths, candidates: list[Candidate], evaluations: list[tuple]
) -> None:
    """Rewrite the detail file of each candidate that is new or has a new evaluation; the
    evaluations already published are read back from its file, not from the store."""
    paths.candidates.mkdir(exist_ok=True)
    new: dict[str, list[dict]] = {}
    for cid, rung, _step, _passed, result in evaluations:
        new.setdefault(cid, []).append({"rung": rung, **result})
    for c in {c.id: c for c in candidates}.values():
        path = paths.candidate(c.id)
        if c.id not in new and path.exists():
            continue
        published = (read_json(path) or {}).get("evaluations", []) if c.id in new else []
        write_json_atomic(path, candidate_detail(c, published + new.get(c.id, [])))


def republish_details(paths: SessionPaths, store, candidates: list[Candidate]) -> None:
    """Detail files from the store, for candidates whose last evaluation may have been committed
    but not published when the engine died."""
    paths.candidates.mkdir(exist_ok=True)
    for c in candidates:
        write_json_atomic(paths.candidate(c.id), candidate_detail(c, store.evaluations(c.id)))


def check_contract(what: str, names, allowed: tuple[str, ...]) -> None:
    """The engine publishes only the names that docs/session-format.md gives: another one is a
    bug here, which no client would understand."""
    unknown = set(names) - set(allowed)
    if unknown:
        raise ValueError(f"{what} {', '.join(sorted(unknown))} is not in the session contract")


def append_events(paths: SessionPaths, events: list[dict]) -> None:
    check_contract("event kind", (e["kind"] for e in events), EVENT_KINDS)
    if events:
        with paths.events.open("a") as fh:
            fh.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)


def rewrite_events(paths: SessionPaths, events: list[dict]) -> None:
    """The event log from the store: after a crash, the file may lack committed events."""
    tmp = paths.events.with_name(".events.jsonl.tmp")
    with tmp.open("w") as fh:
        fh.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    tmp.replace(paths.events)


def write_snapshot(paths: SessionPaths, snapshot: dict, encoded_rows: list[str] | None = None):
    """Publish `snapshot`; `encoded_rows`, when given, is the JSON of its candidate rows."""
    check_contract("state", [snapshot["state"]], SEARCH_STATES)
    check_contract("status", (c["status"] for c in snapshot["candidates"]), CANDIDATE_STATUSES)
    check_contract("command status", (c["status"] for c in snapshot["commands"]), COMMAND_STATUSES)
    data = {"schema": SNAPSHOT_SCHEMA, "updated_at": time.time(), **snapshot}
    if encoded_rows is None:
        write_json_atomic(paths.snapshot, data)
        return
    parts = [
        f'"candidates":[{",".join(encoded_rows)}]'
        if key == "candidates"
        else f"{json.dumps(key)}:{json.dumps(value, separators=SEPARATORS)}"
        for key, value in data.items()
    ]
    write_text_atomic(paths.snapshot, "{" + ",".join(parts) + "}")
