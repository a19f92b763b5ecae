"""The session as clients see it: the snapshot published each step and `show --json`."""

from __future__ import annotations

from engine.backends.devices import Slot
from engine.records import Candidate
from engine.search.specialists import winners_summary
from engine.search.state import Search
from engine.session.publish import SNAPSHOT_ROWS, SnapshotRows, candidate_row


def ledger_summary(search: Search) -> dict:
    ledger = search.ledger
    top_spent = sum(c.gpu_seconds for c in search.index.measured(search.top_rung))
    return {
        "gpu_seconds": round(ledger.gpu_seconds, 6),
        "gpu_seconds_by_rung": {
            k: round(v, 6) for k, v in sorted(ledger.gpu_seconds_by_rung.items())
        },
        "gpu_seconds_by_activity": {
            k: round(v, 6) for k, v in ledger.gpu_seconds_by_activity.items()
        },
        "cpu_seconds_by_activity": {
            k: round(v, 6) for k, v in ledger.cpu_seconds_by_activity.items()
        },
        "gpu_seconds_by_device": {
            k: round(v, 6) for k, v in sorted(ledger.gpu_seconds_by_device.items(), key=_index)
        },
        "idle_seconds": round(ledger.idle_seconds, 3),
        "llm_tokens_in": ledger.llm_tokens_in,
        "llm_tokens_out": ledger.llm_tokens_out,
        "llm_cost_usd": round(ledger.llm_cost_usd, 6),
        "llm_requests": ledger.llm_requests,
        "wall_seconds": round(ledger.wall_seconds, 3),
        "paused_seconds": round(ledger.paused_seconds, 3),
        "evaluations": ledger.evaluations,
        "top_rung_share": round(ledger.share(top_spent), 6),
    }


def _index(item: tuple[str, float]) -> int:
    return int(item[0])


def device_summary(search: Search) -> list[dict]:
    """Each device of the session (its index, the GPU it is): the evaluation planned on it now,
    if any, and the GPU-seconds and evaluations it has spent."""
    ledger = search.ledger
    planned = {slot.device: slot for slot in map(Slot.from_list, search.schedule.inflight)}
    out = []
    for index, gpu in enumerate(search.settings.gpus):
        slot = planned.get(index)
        out.append(
            {
                "index": index,
                "gpu": gpu,
                "evaluating": {"id": slot.cid, "rung": slot.rung} if slot else None,
                "gpu_seconds": round(ledger.gpu_seconds_by_device.get(str(index), 0.0), 6),
                "evaluations": ledger.evaluations_by_device.get(str(index), 0),
            }
        )
    return out


def best_summary(search: Search) -> dict | None:
    best = search.best()
    if best is None:
        return None
    r = best.best_result
    return {
        "id": best.id,
        "speedup": round(r.speedup, 6),
        "speedup_ci": [round(r.low, 6), round(r.high, 6)],
        "rung": max(best.results),
    }


def rung_summary(search: Search) -> list[dict]:
    out = []
    for rung in range(len(search.ladder)):
        spec = search.spec(rung)  # as measured now: rung 0 at its current fidelity
        measured = search.index.measured(spec.index)
        out.append(
            {
                "index": spec.index,
                "sizes": list(spec.size_labels),
                "reps": spec.reps,
                "precision": spec.precision,
                "input_sets": spec.input_sets,
                "profile": spec.profile,
                "measured": len(measured),
                "promoted": len(search.index.measured(spec.index + 1)),
            }
        )
    return out


def agreement_summary(search: Search) -> dict:
    """How well rung 0 ranks as rung 1 does, since its fidelity last changed."""
    agree, decided = search.schedule.agreement
    return {
        "agreement": round(agree / decided, 4) if decided else None,
        "decided_pairs": decided,
        "rung0_level": search.schedule.rung0_level,
    }


def budget_summary(search: Search) -> dict:
    limits = dict(search.limits)
    return {"limits": limits, "left": search.ledger.left(limits)}


def snapshot_rows(search: Search) -> list[Candidate]:
    """A bounded, useful subset: the pinned, the queue's head, the best of each rung, the recent."""
    population = search.population
    if len(population) <= SNAPSHOT_ROWS:
        return population
    chosen: dict[str, Candidate] = {}
    groups = [
        list(search.pinned.values()),
        [search.by_id[i] for i in search.schedule.queue[:100]],
        *(search.index.measured(r)[:100] for r in range(search.top_rung, -1, -1)),
        population[-100:],
    ]
    for group in groups:
        for c in group:
            chosen.setdefault(c.id, c)
    return sorted(chosen.values(), key=lambda c: c.seq)[:SNAPSHOT_ROWS]


def snapshot(search: Search, session: str, engine_pid: int | None, all_rows: bool = False,
             kept: SnapshotRows | None = None) -> dict:  # fmt: skip
    """What clients see of `search` (docs/session-format.md): every candidate's row or a bounded
    subset (`kept` holds the rows of candidates unchanged since the last snapshot)."""
    schedule = search.schedule
    rows = search.population if all_rows else snapshot_rows(search)
    settings = search.settings
    return {
        "session": session,
        "problem": settings.problem,
        "backend": settings.backend,
        "generator": settings.generator,
        "state": schedule.state,
        "stop_reason": schedule.stop_reason,
        "pause_reason": schedule.pause_reason,
        "engine_pid": engine_pid,
        "step": schedule.step,
        "seed": settings.seed,
        "precision_policy": settings.precision_policy,
        "allowed_torch_ops": list(settings.allowed_torch_ops),
        "timings_meaningful": settings.backend != "cpu",
        "best": best_summary(search),
        "shape_winners": winners_summary(search),
        "budget": budget_summary(search),
        "ledger": ledger_summary(search),
        "devices": device_summary(search),
        "progress": schedule.progress,
        "rungs": rung_summary(search),
        "agreement": agreement_summary(search),
        "candidates_total": len(search.population),
        "candidates": kept.rows(rows) if kept else [candidate_row(c) for c in rows],
        "queue": list(schedule.queue),
        "commands": search.command_log,
    }
