"""The session as clients see it: the snapshot published each step and `show --json`."""

from __future__ import annotations

from engine.backends.devices import Slot
from engine.search.specialists import winners_summary
from engine.session.publish import candidate_row, snapshot_rows


def ledger_summary(engine_like) -> dict:
    ledger = engine_like.ledger
    top_spent = sum(c.gpu_seconds for c in engine_like.index.measured(engine_like.top_rung))
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
        "evaluations": ledger.evaluations,
        "top_rung_share": round(ledger.share(top_spent), 6),
    }


def _index(item: tuple[str, float]) -> int:
    return int(item[0])


def device_summary(engine_like) -> list[dict]:
    """Each device of the session (its index, the GPU it is): the evaluation planned on it now,
    if any, and the GPU-seconds and evaluations it has spent."""
    ledger = engine_like.ledger
    planned = {slot.device: slot for slot in map(Slot.from_list, engine_like.search.inflight)}
    out = []
    for index, gpu in enumerate(engine_like.settings.gpus):
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


def best_summary(engine_like) -> dict | None:
    best = engine_like.best()
    if best is None:
        return None
    r = best.best_result
    return {
        "id": best.id,
        "speedup": round(r.speedup, 6),
        "speedup_ci": [round(r.low, 6), round(r.high, 6)],
        "rung": max(best.results),
    }


def rung_summary(engine_like) -> list[dict]:
    out = []
    for rung in range(len(engine_like.ladder)):
        spec = engine_like.spec(rung)  # as measured now: rung 0 at its current fidelity
        measured = engine_like.index.measured(spec.index)
        out.append(
            {
                "index": spec.index,
                "sizes": list(spec.size_labels),
                "reps": spec.reps,
                "input_sets": spec.input_sets,
                "profile": spec.profile,
                "measured": len(measured),
                "promoted": len(engine_like.index.measured(spec.index + 1)),
            }
        )
    return out


def agreement_summary(engine_like) -> dict:
    """How well rung 0 ranks as rung 1 does, since its fidelity last changed."""
    agree, decided = engine_like.search.agreement
    return {
        "agreement": round(agree / decided, 4) if decided else None,
        "decided_pairs": decided,
        "rung0_level": engine_like.search.rung0_level,
    }


def budget_summary(engine_like) -> dict:
    limits = dict(engine_like.limits)
    return {"limits": limits, "left": engine_like.ledger.left(limits)}


def snapshot(engine_like, all_rows: bool = False) -> dict:
    search = engine_like.search
    rows = engine_like.population if all_rows else snapshot_rows(engine_like, search.queue)
    settings = engine_like.settings
    return {
        "session": engine_like.paths.name,
        "problem": settings.problem,
        "backend": settings.backend,
        "generator": settings.generator,
        "state": search.state,
        "stop_reason": search.stop_reason,
        "engine_pid": engine_like.engine_pid,
        "step": search.step,
        "seed": settings.seed,
        "precision_policy": settings.precision_policy,
        "allowed_torch_ops": list(settings.allowed_torch_ops),
        "timings_meaningful": settings.backend != "cpu",
        "best": best_summary(engine_like),
        "shape_winners": winners_summary(engine_like),
        "budget": budget_summary(engine_like),
        "ledger": ledger_summary(engine_like),
        "devices": device_summary(engine_like),
        "progress": search.progress,
        "rungs": rung_summary(engine_like),
        "agreement": agreement_summary(engine_like),
        "candidates_total": len(engine_like.population),
        "candidates": [candidate_row(c) for c in rows],
        "queue": list(search.queue),
        "commands": engine_like.commands(),
    }
