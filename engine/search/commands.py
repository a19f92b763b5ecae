"""Control commands from the session inbox, applied by the engine at a step boundary."""

from __future__ import annotations

from engine.search.budget import BudgetError, parse_budget_increase
from engine.session_files import CANDIDATE_COMMANDS, limit_name


def apply_command(search, command: dict) -> tuple[str, str, object]:
    """Apply one command to an engine.search.state.Search.

    Returns ("applied" | "rejected", message, the candidate it changed or None)."""
    name, cid = command.get("command"), command.get("candidate")
    schedule = search.schedule
    if name in CANDIDATE_COMMANDS:
        c = search.by_id.get(cid)
        if c is None:
            return "rejected", f"{name}: no candidate {cid!r} in this session", None
        if name == "pin":
            search.pin(c)
        elif name == "unpin":
            search.unpin(c)
        else:
            search.veto(c)
        return "applied", f"{name} {cid}", c
    if name in ("pause", "unpause", "stop"):
        schedule.pause_reason = None  # the user's state from now on, not the machine's pause
    if name == "pause":
        if schedule.state == "running":
            schedule.state = "paused"
        return "applied", "paused: the engine waits at the step boundary", None
    if name == "unpause":
        if schedule.state == "paused":
            schedule.state = "running"
        return "applied", "unpaused: the search goes on", None
    if name == "stop":
        schedule.state, schedule.stop_reason = "stopped", "stopped by the user"
        return "applied", "stop requested", None
    if name == "budget":
        try:
            kind, amount = parse_budget_increase(command.get("amount") or "")
        except BudgetError as exc:
            return "rejected", str(exc), None
        name = limit_name(kind, search.settings.backend)
        if kind not in search.limits:  # adding budget never creates a limit: it only adds
            return "applied", f"no {name} limit: it stays unlimited", None
        search.limits[kind] += amount
        return "applied", f"budget {name} now {search.limits[kind]:g}", None
    return "rejected", f"unknown command {name!r}", None
