"""What the engine publishes for clients after each step (docs/session-format.md)."""

from __future__ import annotations

import json

from engine.search.population import Candidate
from engine.session_files import SessionPaths, write_json_atomic

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


def snapshot_rows(population: list[Candidate], queue: list[str]) -> list[Candidate]:
    """A bounded, useful subset: best by score, queued, pinned, most recent."""
    if len(population) <= SNAPSHOT_ROWS:
        return population
    by_id = {c.id: c for c in population}
    scored = sorted((c for c in population if c.score is not None), key=lambda c: -c.score)
    chosen: dict[str, Candidate] = {}
    for group in (
        [c for c in population if c.pinned],
        [by_id[i] for i in queue[:100] if i in by_id],
        scored[:250],
        population[-100:],
    ):
        for c in group:
            chosen.setdefault(c.id, c)
    return sorted(chosen.values(), key=lambda c: c.seq)[:SNAPSHOT_ROWS]


def write_candidate_detail(paths: SessionPaths, c: Candidate, evaluations: list[dict]) -> None:
    paths.candidates.mkdir(exist_ok=True)
    write_json_atomic(
        paths.candidate(c.id),
        {
            "id": c.id,
            "parent": c.parent,
            "origin": c.origin,
            "params": c.params,
            "note": c.note,
            "source": c.source,
            "evaluations": evaluations,
            "profile": c.profile,
        },
    )


def append_events(paths: SessionPaths, events: list[dict]) -> None:
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
    write_json_atomic(paths.snapshot, {"schema": SNAPSHOT_SCHEMA, **snapshot})
