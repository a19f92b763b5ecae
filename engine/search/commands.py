"""Control commands from the session inbox, applied by the engine at a step boundary."""

from __future__ import annotations

from engine.search.budget import BudgetError, parse_budget_increase
from engine.session_files import CANDIDATE_COMMANDS


def apply_command(engine, command: dict) -> tuple[str, str, object]:
    """Apply one command to the engine's state.

    Returns ("applied" | "rejected", message, the candidate it changed or None)."""
    name, cid = command.get("command"), command.get("candidate")
    search = engine.search
    if name in CANDIDATE_COMMANDS:
        c = engine.by_id.get(cid)
        if c is None:
            return "rejected", f"{name}: no candidate {cid!r} in this session", None
        if name == "pin":
            c.pinned = True
            engine.pinned[c.id] = c
            if c.status == "pruned":
                c.status = "alive"
        elif name == "unpin":
            c.pinned = False
            engine.pinned.pop(c.id, None)
        else:
            c.vetoed, c.pinned, c.status = True, False, "vetoed"
            engine.index.remove(c)
            engine.pinned.pop(c.id, None)
            if cid in search.queue:
                search.queue.remove(cid)
        return "applied", f"{name} {cid}", c
    if name == "pause":
        if search.state == "running":
            search.state = "paused"
        return "applied", "paused: the engine waits at the step boundary", None
    if name == "unpause":
        if search.state == "paused":
            search.state = "running"
        return "applied", "unpaused: the search goes on", None
    if name == "stop":
        search.state, search.stop_reason = "stopped", "stopped by the user"
        return "applied", "stop requested", None
    if name == "budget":
        try:
            kind, amount = parse_budget_increase(command.get("amount") or "")
        except BudgetError as exc:
            return "rejected", str(exc), None
        if kind not in engine.limits:  # adding budget never creates a limit: it only adds
            return "applied", f"no {kind} limit: it stays unlimited", None
        engine.limits[kind] += amount
        return "applied", f"budget {kind} now {engine.limits[kind]:g}", None
    return "rejected", f"unknown command {name!r}", None
