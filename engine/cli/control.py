"""Steering a session: pin, unpin, veto, pause, unpause and budget, sent through its inbox."""

from __future__ import annotations

import sys

from engine.cli import UsageError
from engine.cli.sessions import add_sessions_dir, session_folder_writes, session_of
from engine.search.budget import LIMIT_KINDS, BudgetError, parse_budget_increase
from engine.session_files import engine_running, limit_name, read_snapshot, send_command


def register(sub) -> None:
    for name, helptext in (
        ("pin", "never prune a candidate"),
        ("unpin", "undo pin"),
        ("veto", "drop a candidate; its source is never generated again"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("session")
        p.add_argument("candidate")
        add_sessions_dir(p)
        p.set_defaults(handler=cmd_control, control=name)
    for name, helptext in (
        ("pause", "pause the search at the next step boundary"),
        ("unpause", "continue a paused search"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("session")
        add_sessions_dir(p)
        p.set_defaults(handler=cmd_control, control=name)
    p = sub.add_parser(
        "budget",
        help="add budget to a session's limits, e.g. +10m or +50evals",
        description="Raise one of a session's limits. Adding never takes any away: a kind of "
        "budget the session has no limit on stays unlimited.",
    )
    p.add_argument("session")
    p.add_argument("amount")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_control, control="budget")


def cmd_control(args) -> int:
    paths = session_of(args)
    candidate = getattr(args, "candidate", None)
    amount = getattr(args, "amount", None)
    snap = read_snapshot(paths)
    if candidate is not None and snap is not None and not paths.candidate(candidate).exists():
        raise UsageError(f"session {paths.name} has no candidate {candidate!r}")
    if amount is not None and (note := unchanged_by(amount, paths.name, snap)):
        print(note, file=sys.stderr)
        return 0
    with session_folder_writes(paths):
        message = send_command(paths, args.control, candidate=candidate, amount=amount)
    when = "at its next step" if engine_running(paths) else "when the session is resumed"
    print(
        f"{args.control} queued as {message['id']}: the engine applies it {when}", file=sys.stderr
    )
    return 0


def unchanged_by(amount: str, name: str, snap: dict | None) -> str | None:
    """Why adding `amount` would change nothing: the session has no limit of its kind, and
    adding budget never creates one. None when it has (or nothing is published: the engine
    judges)."""
    try:
        kind, _ = parse_budget_increase(amount)
    except BudgetError as exc:
        raise UsageError(str(exc)) from exc
    if snap is None:
        return None
    limits = {k: v for k, v in snap["budget"]["limits"].items() if k in LIMIT_KINDS and v}
    if kind in limits:
        return None
    backend = snap.get("backend")
    held = ", ".join(f"{limit_name(k, backend)} {v:g}" for k, v in limits.items()) or "none"
    return (
        f"session {name} has no {limit_name(kind, backend)} limit, so it stays unlimited and "
        f"{amount} was not sent (its limits: {held})"
    )
