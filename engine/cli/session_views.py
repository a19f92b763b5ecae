"""Looking at sessions: ls, show and export."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from engine.cli import CommandFailed, UsageError
from engine.cli.sessions import add_sessions_dir, progress_line, session_of
from engine.session_files import (
    BEST_CAVEAT,
    BEST_MEANING,
    ExportError,
    SessionPaths,
    engine_running,
    exported_source,
    list_sessions,
    read_snapshot,
    seconds_unit,
    sessions_root,
    shown_state,
)

SHOWN_CANDIDATES = 20  # rows `show` lists without --all: the best, then the top scores


def register(sub) -> None:
    p = sub.add_parser("ls", help="list sessions")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_ls)

    what = (
        f"a session's state, ledger and candidates: the best (marked *: {BEST_MEANING}), "
        f"then the others by score, {SHOWN_CANDIDATES} in all unless --all"
    )
    p = sub.add_parser("show", help=what, description=what[0].upper() + what[1:] + ".")
    p.add_argument("session")
    p.add_argument("--json", action="store_true")
    p.add_argument("--all", action="store_true", help="list every candidate")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("export", help="write a candidate as a standalone KernelBench file")
    p.add_argument("session")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.add_argument("--candidate", help=f"candidate id (default: the best, {BEST_MEANING})")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_export)


def as_shown(paths: SessionPaths, data: dict, engine_alive: bool) -> dict:
    """The session's data with the state a client shows (see shown_state)."""
    state = shown_state(data["state"], engine_alive)
    if state == data["state"]:
        return data
    reason = f"no engine runs it: `kernelbrain resume {paths.name}` continues it"
    return {**data, "state": state, "stop_reason": reason}


def cmd_ls(args) -> int:
    root = sessions_root(args.sessions_dir)
    rows = []
    for paths in list_sessions(root):
        snap = read_snapshot(paths)
        if snap is None:  # created, but no engine has published it yet
            rows.append((paths.name, "-", "not started", "-", "-"))
            continue
        snap = as_shown(paths, snap, engine_running(paths))
        best = f"{snap['best']['speedup']:.3f}x" if snap["best"] else "-"
        ledger = snap["ledger"]
        unit = seconds_unit(snap.get("backend"))
        used = f"{ledger['gpu_seconds']:.1f} {unit}, {ledger['evaluations']} evals"
        rows.append((paths.name, snap["problem"], snap["state"], best, used))
    if not rows:
        print(
            f"no sessions in {root}/: `kernelbrain run PROBLEM` starts one, and --sessions-dir "
            "or KERNELBRAIN_SESSIONS looks in another folder",
            file=sys.stderr,
        )
        return 0
    header = ("SESSION", "PROBLEM", "STATE", "BEST", "BUDGET USED")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def show_data(paths: SessionPaths) -> dict:
    """The engine's snapshot while one runs; otherwise the full view from the store."""
    from engine.compose import open_view
    from engine.session.store import StoreError

    if engine_running(paths):
        snap = read_snapshot(paths)
        if snap is None:
            raise UsageError(f"session {paths.name}'s engine is starting: try again in a moment")
        return snap
    try:
        view = open_view(paths)
    except StoreError as exc:
        raise UsageError(str(exc)) from exc
    try:
        return as_shown(paths, view.snapshot(all_rows=True), engine_alive=False)
    finally:
        view.store.close()


def cmd_show(args) -> int:
    data = show_data(session_of(args))
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(progress_line(data))
    print(f"state: {data['state']}" + (f" ({data['stop_reason']})" if data["stop_reason"] else ""))
    if data.get("pause_reason"):
        print(f"paused by machine faults: {data['pause_reason']}")
    print(f"precision policy: {data['precision_policy']}")
    if data.get("allowed_torch_ops"):
        print(f"torch ops allowed in forward: {', '.join(data['allowed_torch_ops'])}")
    ledger = data["ledger"]
    print(
        f"wall clock: {ledger['wall_seconds']:.1f}s spent ({ledger['idle_seconds']:.1f}s idle); "
        f"{ledger.get('paused_seconds', 0.0):.1f}s paused, which spends no budget"
    )
    winners = data.get("shape_winners") or {"sizes": {}}
    if len({w["id"] for w in winners["sizes"].values()}) > 1:
        print(f"per-size winners at rung {winners['rung']}:")
        for label, w in winners["sizes"].items():
            print(f"  {label}: {w['id']} {w['speedup']:.3f}x")
    print("\n".join(candidate_lines(data, args)))
    return 0


def candidate_lines(data: dict, args) -> list[str]:
    """The candidates as a table: the best first, marked *, then the rest by score; without
    --all the first SHOWN_CANDIDATES, saying how many there are and how to see them all."""
    best_id = (data["best"] or {}).get("id")
    rows = sorted(data["candidates"], key=lambda c: (c["id"] != best_id, -(c["score"] or 0)))
    shown = rows if args.all else rows[:SHOWN_CANDIDATES]
    if best_id:
        lines = [f"best (*): {BEST_MEANING}; {BEST_CAVEAT}"]
    else:
        lines = ["no best yet: no candidate has been measured"]
    table = [("", "ID", "RUNG", "STATUS", "SPEEDUP", "SCORE", "ORIGIN")]
    for c in shown:
        origin = c["origin"] + (f"  ({c['reason']})" if c["reason"] else "")
        speedup = f"{c['speedup']:.3f}x" if c["speedup"] else "-"
        score = f"{c['score']:.3f}" if c["score"] is not None else "-"
        mark = "*" if c["id"] == best_id else ""
        table.append((mark, c["id"], str(c["rung"]), c["status"], speedup, score, origin))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    right = {4, 5}  # the numbers
    for row in table:
        cells = [v.rjust(w) if i in right else v.ljust(w)
                 for i, (v, w) in enumerate(zip(row, widths, strict=False))]  # fmt: skip
        lines.append("  ".join([*cells, row[-1]]))
    total = data["candidates_total"]
    if len(shown) < total:
        lines.append(f"{len(shown)} of {total} shown" + more_hint(data, args, len(rows)))
    return lines


def more_hint(data: dict, args, listed: int) -> str:
    """How to see the candidates `show` left out."""
    where = f" --sessions-dir {shlex.quote(args.sessions_dir)}" if args.sessions_dir else ""
    command = f"`kernelbrain show {data['session']}{where} --all`"
    if listed < data["candidates_total"]:  # a running engine publishes a bounded subset
        return f" (the running engine publishes {listed}; {command} lists all once it stops)"
    return f" ({command} for every candidate)"


def cmd_export(args) -> int:
    paths = session_of(args, published=True)
    cid = args.candidate or ((read_snapshot(paths) or {}).get("best") or {}).get("id")
    if cid is None:
        raise UsageError(
            f"session {paths.name} has no measured candidate yet; name one with --candidate"
        )
    try:
        text = exported_source(paths, cid)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text)
    except OSError as exc:
        raise CommandFailed(
            f"cannot write {args.output}: {exc.strerror}; give a file in a folder that exists "
            "and can be written, or leave out -o to print the file"
        ) from exc
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
