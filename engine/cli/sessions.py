"""Session commands: run, resume, stop, ls, show, export and the control commands."""

from __future__ import annotations

import json
import os
import sys
import time

from engine.cli import UsageError
from engine.problems import PRECISION_POLICIES
from engine.search.budget import BudgetError, parse_budget, parse_budget_increase
from engine.session.store import StoreError
from engine.session_files import (
    ExportError,
    SessionPaths,
    engine_running,
    exported_source,
    read_snapshot,
    send_command,
    sessions_root,
    start_detached_engine,
)

DEFAULT_BUDGET = "30m"
PROGRESS_INTERVAL_S = 1.0


def add_sessions_dir(p) -> None:
    p.add_argument(
        "--sessions-dir",
        help="folder of sessions (default: $KERNELBRAIN_SESSIONS or ./sessions)",
    )


def add_precision(p) -> None:
    p.add_argument(
        "--precision",
        default="strict",
        choices=PRECISION_POLICIES,
        help="how fp32 inputs may be computed: strict (in fp32, the default) or tf32 (TF32 "
        "tensor cores allowed; the PyTorch reference runs with TF32 enabled); fp16/bf16 inputs "
        "are unaffected",
    )


def register(sub) -> None:
    p = sub.add_parser("run", help="start an optimization of a problem")
    p.add_argument("problem", help="built-in problem name or KernelBench .py file")
    p.add_argument("--session", help="session name (default: PROBLEM-YYYYmmdd-HHMMSS)")
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        help="30m, 2h, 600gpu-s, 200evals, $5; repeat or comma-separate (default 30m)",
    )
    p.add_argument("--target-speedup", type=float, help="stop once a confirmed kernel reaches it")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu", "sim"))
    p.add_argument("--generator", default="offline", choices=("offline", "llm"))
    p.add_argument("--model", help="litellm model string, with --generator llm")
    p.add_argument("--api-base", help="OpenAI-compatible server URL, with --generator llm")
    p.add_argument("--seed", type=int, default=0)
    add_precision(p)
    p.add_argument("--headless", action="store_true", help="run in the foreground, no TUI")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("resume", help="continue a stopped or killed session")
    p.add_argument("session")
    p.add_argument("--headless", action="store_true")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_resume)

    p = sub.add_parser("stop", help="stop a running engine at its next step boundary")
    p.add_argument("session")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_stop)

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
    p = sub.add_parser("budget", help="add budget to a session, e.g. +10m or +50evals")
    p.add_argument("session")
    p.add_argument("amount")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_control, control="budget")


def paths_of(args, must_exist=True) -> SessionPaths:
    from engine.session.manager import existing_session, session_paths

    try:
        if must_exist:
            return existing_session(args.session, args.sessions_dir)
        return session_paths(args.session, args.sessions_dir)
    except StoreError as exc:
        raise UsageError(str(exc)) from exc


def cmd_run(args) -> int:
    from engine.generate.base import GeneratorError
    from engine.problems import ProblemError
    from engine.session.manager import create_session

    if args.generator == "llm" and not args.model:
        raise UsageError("--generator llm needs --model (a litellm model string)")
    try:
        limits = parse_budget(args.budget or [DEFAULT_BUDGET])
    except BudgetError as exc:
        raise UsageError(str(exc)) from exc
    if args.target_speedup:
        limits["target_speedup"] = args.target_speedup
    stem = os.path.splitext(os.path.basename(args.problem))[0]
    args.session = args.session or f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    paths = paths_of(args, must_exist=False)
    try:
        create_session(
            paths,
            args.problem,
            args.backend,
            args.generator,
            args.seed,
            limits,
            model=args.model,
            api_base=args.api_base,
            precision_policy=args.precision,
        )
    except (ProblemError, GeneratorError, StoreError, RuntimeError) as exc:
        raise UsageError(str(exc)) from exc
    print(f"session {paths.name} in {paths.root}", file=sys.stderr)
    return cmd_resume(args)


def cmd_resume(args) -> int:
    paths = paths_of(args)
    if not args.headless:
        if not engine_running(paths):
            start_detached_engine(paths)
        return attach(paths)
    return run_headless(paths)


def run_headless(paths: SessionPaths) -> int:
    from engine.generate.base import GeneratorError
    from engine.session.lock import SessionBusy
    from engine.session.manager import resume_session

    try:
        engine = resume_session(paths)
    except (GeneratorError, StoreError, SessionBusy) as exc:
        raise UsageError(str(exc)) from exc
    try:
        state = engine.run(on_step=search_progress())
    finally:
        engine.backend.close()
        engine.store.close()
    snap = read_snapshot(paths)
    print(progress_line(snap), file=sys.stderr)
    print(f"{state}: {snap['stop_reason']}", file=sys.stderr)
    return 0


def search_progress():
    """A step callback that prints the search's progress line every PROGRESS_INTERVAL_S."""
    last = [0.0]

    def on_step(engine) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_INTERVAL_S:
            last[0] = now
            print(progress_line(engine.last_snapshot), file=sys.stderr, flush=True)

    return on_step


def progress_line(snap: dict) -> str:
    rungs = " ".join(f"r{r['index']}:{r['measured']}" for r in snap["rungs"])
    best = snap["best"]
    best_text = f"best {best['id']} {best['speedup']:.3f}x" if best else "best -"
    left = ", ".join(f"{k} {v:.0f}" for k, v in snap["budget"]["left"].items() if v is not None)
    tag = "" if snap["timings_meaningful"] else " (cpu: timings not meaningful)"
    return (
        f"[{snap['session']} step {snap['step']}] {rungs} | {best_text}{tag} | "
        f"{snap['ledger']['gpu_seconds']:.1f} gpu-s | left: {left or 'unlimited'}"
    )


def attach(paths: SessionPaths) -> int:
    from kbtui.app import run_app

    return run_app(paths) or 0


def cmd_stop(args) -> int:
    paths = paths_of(args)
    if not engine_running(paths):
        print(f"session {paths.name} has no running engine", file=sys.stderr)
        return 0
    send_command(paths, "stop")
    print(f"stop sent to {paths.name}: the engine stops at its next step boundary", file=sys.stderr)
    return 0


def session_summary(paths: SessionPaths) -> dict | None:
    snap = read_snapshot(paths)
    if snap is None:
        return None
    state = snap["state"]
    if state in ("running", "paused") and not engine_running(paths):
        state = "stopped"
    return {**snap, "state": state}


def cmd_ls(args) -> int:
    root = sessions_root(args.sessions_dir)
    rows = []
    for folder in sorted(root.iterdir()) if root.exists() else []:
        snap = session_summary(SessionPaths(folder))
        if snap:
            best = f"{snap['best']['speedup']:.3f}x" if snap["best"] else "-"
            ledger = snap["ledger"]
            used = f"{ledger['gpu_seconds']:.1f} gpu-s, {ledger['evaluations']} evals"
            rows.append((folder.name, snap["problem"], snap["state"], best, used))
    if not rows:
        print(f"no sessions under {root}/", file=sys.stderr)
        return 0
    header = ("SESSION", "PROBLEM", "STATE", "BEST", "BUDGET USED")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def show_data(paths: SessionPaths) -> dict:
    """The full view from the store when no engine runs; the engine's snapshot otherwise."""
    from engine.search import report
    from engine.session.manager import open_view

    if engine_running(paths):
        return session_summary(paths)
    view = open_view(paths)
    try:
        return report.snapshot(view, all_rows=True)
    finally:
        view.store.close()


def cmd_show(args) -> int:
    paths = paths_of(args)
    try:
        data = show_data(paths)
    except StoreError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(progress_line(data))
    print(f"state: {data['state']}" + (f" ({data['stop_reason']})" if data["stop_reason"] else ""))
    print(f"precision policy: {data['precision_policy']}")
    for c in sorted(data["candidates"], key=lambda c: -(c["score"] or 0))[:20]:
        speed = f"{c['speedup']:.3f}x" if c["speedup"] else "-"
        print(
            f"  {c['id']}  rung {c['rung']}  {c['status']:<9} {speed:>9}  {c['origin']}"
            + (f"  ({c['reason']})" if c["reason"] else "")
        )
    return 0


def cmd_export(args) -> int:
    paths = paths_of(args)
    cid = args.candidate or ((read_snapshot(paths) or {}).get("best") or {}).get("id")
    if cid is None:
        raise UsageError(
            f"session {paths.name} has no measured candidate yet; name one with --candidate"
        )
    try:
        text = exported_source(paths, cid)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_control(args) -> int:
    paths = paths_of(args)
    candidate = getattr(args, "candidate", None)
    amount = getattr(args, "amount", None)
    if amount is not None:
        try:
            parse_budget_increase(amount)
        except BudgetError as exc:
            raise UsageError(str(exc)) from exc
    snap = read_snapshot(paths)
    if candidate is not None and snap is not None and not paths.candidate(candidate).exists():
        raise UsageError(f"session {paths.name} has no candidate {candidate!r}")
    message = send_command(paths, args.control, candidate=candidate, amount=amount)
    when = "at its next step" if engine_running(paths) else "when the session is resumed"
    print(
        f"{args.control} queued as {message['id']}: the engine applies it {when}", file=sys.stderr
    )
    return 0
