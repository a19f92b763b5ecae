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


def snapshot_rows(engine_like, queue: list[str]) -> list[Candidate]:
    """A bounded, useful subset: the pinned, the queue's head, the best of each rung, the recent."""
    population = engine_like.population
    if len(population) <= SNAPSHOT_ROWS:
        return population
    chosen: dict[str, Candidate] = {}
    groups = [
        list(engine_like.pinned.values()),
        [engine_like.by_id[i] for i in queue[:100]],
        *(engine_like.index.measured(r)[:100] for r in range(engine_like.top_rung, -1, -1)),
        population[-100:],
    ]
    for group in groups:
        for c in group:
            chosen.setdefault(c.id, c)
    return sorted(chosen.values(), key=lambda c: c.seq)[:SNAPSHOT_ROWS]


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


def write_snapshot(paths: SessionPaths, snapshot: dict) -> None:
    check_contract("state", [snapshot["state"]], SEARCH_STATES)
    check_contract("status", (c["status"] for c in snapshot["candidates"]), CANDIDATE_STATUSES)
    check_contract("command status", (c["status"] for c in snapshot["commands"]), COMMAND_STATUSES)
    write_json_atomic(
        paths.snapshot, {"schema": SNAPSHOT_SCHEMA, "updated_at": time.time(), **snapshot}
    )
