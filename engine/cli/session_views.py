"""Looking at sessions: ls, show and export."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.cli import CommandFailed, UsageError
from engine.cli.sessions import add_sessions_dir, progress_line, session_of
from engine.session_files import (
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


def register(sub) -> None:
    p = sub.add_parser("ls", help="list sessions")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_ls)

    p = sub.add_parser("show", help="a session's state, candidates and ledger")
    p.add_argument("session")
    p.add_argument("--json", action="store_true")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("export", help="write a candidate as a standalone KernelBench file")
    p.add_argument("session")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.add_argument("--candidate", help="candidate id (default: the best)")
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
    for c in sorted(data["candidates"], key=lambda c: -(c["score"] or 0))[:20]:
        speed = f"{c['speedup']:.3f}x" if c["speedup"] else "-"
        print(
            f"  {c['id']}  rung {c['rung']}  {c['status']:<9} {speed:>9}  {c['origin']}"
            + (f"  ({c['reason']})" if c["reason"] else "")
        )
    return 0


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
