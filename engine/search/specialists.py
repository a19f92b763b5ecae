"""Per-shape specialists at the search's end: the winner of each target size at the highest rung
reached and, where the winners differ, the composite candidate that dispatches each size to its
winner (engine.generate.composite), stored as the search ends and then gated and timed at that
rung like any candidate: it becomes the answer only if it measures best."""

from __future__ import annotations

from engine.generate.base import Proposal
from engine.generate.composite import ORIGIN, CompositeError, Member, Route, composite_source
from engine.generate.composite import input_key as composite_input_key
from engine.records import Candidate
from engine.session.store import StepWrite


def answer_rung(search) -> int | None:
    """The highest rung at which anything was measured: where the answer comes from."""
    for rung in range(search.top_rung, -1, -1):
        if search.index.measured(rung):
            return rung
    return None


def shape_winners(search, rung: int) -> dict[str, Candidate]:
    """{size label: the candidate with the best speedup there} at `rung`, in the rung's order
    of sizes (composites excluded: they dispatch to winners)."""
    leaders = search.index.leaders.get(rung, {})
    labels = [*search.ladder[rung].size_labels, *sorted(leaders)]
    return {label: leaders[label] for label in dict.fromkeys(labels) if label in leaders}


def winners_summary(search) -> dict | None:
    """What `show --json` says of the per-shape winners: the rung, and per size label the
    winner's id, speedup and interval."""
    rung = answer_rung(search)
    if rung is None:
        return None
    sizes = {}
    for label, c in shape_winners(search, rung).items():
        speedup, low, high = c.results[rung].shapes[label]
        interval = [round(low, 6), round(high, 6)]
        sizes[label] = {"id": c.id, "speedup": round(speedup, 6), "speedup_ci": interval}
    return {"rung": rung, "sizes": sizes}


def compose(search, write: StepWrite, specs: dict) -> tuple[Candidate, int] | None:
    """As the search ends: where the sizes' winners at the highest rung reached differ, store
    their composite (dispatching on `specs`, the problem's input specs) and return it with the
    rung to evaluate it at; None when there is nothing to compose or this composite exists."""
    rung = answer_rung(search)
    if rung is None:
        return None
    winners = shape_winners(search, rung)
    default = next((c for c in search.index.measured(rung) if c.origin != ORIGIN), None)
    others = {c.id: c for c in winners.values() if c is not default}
    others = sorted(others.values(), key=lambda c: c.seq)
    if default is None or not others:
        return None
    members = [default, *others]
    routes = [
        Route(label, composite_input_key(specs[label]), members.index(c), f"{c.id}, {speed:.3f}x")
        for label, c in winners.items()
        if label in specs
        for speed in [c.results[rung].shapes[label][0]]
    ]
    if not routes:  # the problem's input shapes are unknown: nothing to dispatch on
        return None
    try:
        source = composite_source([Member(c.id, c.source) for c in members], routes)
    except CompositeError as exc:
        search.event(write, "generation_note", f"no composite of the per-shape winners: {exc}")
        return None
    dispatch = ", ".join(f"{label} to {c.id}" for label, c in winners.items())
    chosen = {label: c.id for label, c in winners.items()}
    params = {"rung": rung, "default": default.id, "winners": chosen}
    note = f"composite of the per-shape winners at rung {rung}: {dispatch}, else {default.id}"
    if not search.admit(write, [Proposal(source, ORIGIN, params, note)], None):
        return None  # composed before, from the same winners
    composite = search.population[-1]
    search.schedule.queue.remove(composite.id)  # it is timed at its members' rung, not rung 0
    search.schedule.exhausted.append(composite.id)  # never mutated: its members are
    return composite, rung
