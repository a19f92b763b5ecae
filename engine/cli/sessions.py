"""Running sessions: run, resume and stop, and what the other session commands share."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from engine.backends import GPUS_HELP
from engine.backends.ray_fleet import RAY_HELP
from engine.cli import EXIT_INTERRUPTED, CommandFailed, UsageError
from engine.cli.answer import print_answer
from engine.cli.trust import (
    TRUST_SWITCH,
    add_trust_arguments,
    add_trust_candidates,
    candidate_isolation,
    candidates_trusted,
)
from engine.errors import KernelBrainError
from engine.problems import PRECISION_POLICIES
from engine.search.budget import BudgetError, parse_budget
from engine.session_files import (
    BEST_MEANING,
    SessionError,
    SessionPaths,
    engine_running,
    find_session,
    limit_name,
    new_session_paths,
    read_snapshot,
    seconds_unit,
    send_command,
    spent_budget_message,
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
    p.add_argument(
        "--session",
        help="session name: letters, digits, '.', '_', '-' (default: PROBLEM-YYYYmmdd-HHMMSS)",
    )
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        help="30m, 2h, 600gpu-s (on the cpu backend 600device-s: the same), 200evals, $5; "
        "repeat or comma-separate (default 30m)",
    )
    p.add_argument("--target-speedup", type=float, help="stop once a confirmed kernel reaches it")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu", "sim"))
    p.add_argument("--gpus", default="1", help=GPUS_HELP)
    p.add_argument("--ray", metavar="local|ADDRESS", help=RAY_HELP)
    p.add_argument("--generator", default="offline", choices=("offline", "llm"))
    p.add_argument("--model", help="litellm model string, with --generator llm")
    p.add_argument("--api-base", help="OpenAI-compatible server URL, with --generator llm")
    p.add_argument("--seed", type=int, default=0)
    add_precision(p)
    add_trust_arguments(p)
    add_headless(p)
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("resume", help="continue a stopped or killed session")
    p.add_argument("session")
    add_trust_candidates(p)
    add_headless(p)
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_resume)

    p = sub.add_parser("stop", help="stop a running engine at its next step boundary")
    p.add_argument("session")
    add_sessions_dir(p)
    p.set_defaults(handler=cmd_stop)


def add_headless(p) -> None:
    p.add_argument(
        "--headless",
        action="store_true",
        help="run in the foreground, no TUI: progress on stderr, at the end the best candidate "
        f"({BEST_MEANING}) and the commands to look at and export it on stdout",
    )
    p.add_argument(
        "--json", action="store_true", help="headless, with its answer as one JSON line on stdout"
    )


def session_of(args, published: bool = False) -> SessionPaths:
    """The existing session that `args.session` names, or a UsageError saying where we looked.
    `published`: one whose database is gone will do (engine.session_files.find_session)."""
    try:
        return find_session(args.session, args.sessions_dir, published)
    except SessionError as exc:
        raise UsageError(str(exc)) from exc


@contextmanager
def session_folder_writes(paths: SessionPaths):
    """A write into the sessions folder that fails (read-only, not a folder) ends the command
    with one line naming the file; other errors pass through."""
    try:
        yield
    except OSError as exc:
        folder = paths.root.parent.resolve()
        if exc.filename is None or not Path(exc.filename).resolve().is_relative_to(folder):
            raise
        raise CommandFailed(
            f"cannot write {exc.filename}: {exc.strerror}; sessions need a folder they can write "
            "to: make it writable or choose another with --sessions-dir or KERNELBRAIN_SESSIONS"
        ) from exc


def default_session_name(problem: str) -> str:
    stem = os.path.splitext(os.path.basename(problem))[0]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).lstrip("._-") or "session"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def cmd_run(args) -> int:
    from engine.compose import create_session, start_backends
    from engine.session.settings import SessionSettings

    if args.generator == "llm" and not args.model:
        raise UsageError("--generator llm needs --model (a litellm model string)")
    candidate_isolation(args.generator, args.backend, candidates_trusted(args))  # may refuse
    try:
        limits = parse_budget(args.budget or [DEFAULT_BUDGET])
    except BudgetError as exc:
        raise UsageError(str(exc)) from exc
    if args.target_speedup:
        limits["target_speedup"] = args.target_speedup
    if args.session is None:
        args.session = default_session_name(args.problem)
    try:
        paths = new_session_paths(args.session, args.sessions_dir)
    except SessionError as exc:
        raise UsageError(str(exc)) from exc
    trust_switch(args)
    backends: list = []
    with failing_start_said(backends), session_folder_writes(paths):
        wanted = SessionSettings(
            problem=args.problem,
            backend=args.backend,
            seed=args.seed,
            limits=limits,
            generator=args.generator,
            model=args.model,
            api_base=args.api_base,
            precision_policy=args.precision,
            allowed_torch_ops=args.allow_torch_ops,
            gpus=args.gpus,
            ray=args.ray,
        )
        if runs_headless(args):  # this process runs the engine: its judges start now
            wanted, started = start_backends(wanted)
            backends.extend(started)
        create_session(paths, wanted)
    print(f"session {paths.name} in {paths.root}", file=sys.stderr)
    return cmd_resume(args, backends)


def trust_switch(args) -> None:
    """With --trust-candidates, the engine processes this one starts (judges, the TUI's detached
    engine) trust the candidates."""
    if args.trust_candidates:
        os.environ[TRUST_SWITCH] = "1"


def runs_headless(args) -> bool:
    """Whether the engine runs in this process: --headless, --json, or no terminal for the TUI."""
    return args.headless or args.json or not (sys.stdin.isatty() and sys.stdout.isatty())


def close_all(backends: list | None) -> None:
    for backend in backends or ():
        backend.close()


@contextmanager
def failing_start_said(backends: list | None):
    """What stops a session from starting, as a UsageError (ProblemError, GeneratorError,
    StoreError, SessionBusy, ...; a folder it cannot write stays a CommandFailed), with the
    `backends` started for it closed."""
    try:
        yield
    except BaseException as exc:
        close_all(backends)
        if isinstance(exc, KernelBrainError) and not isinstance(exc, CommandFailed):
            raise UsageError(str(exc)) from exc
        raise


def cmd_resume(args, backends: list | None = None) -> int:
    """`backends`: those `run` started for the new session before loading its problem (only
    when the engine runs in this process)."""
    paths = session_of(args)
    trust_switch(args)
    running = engine_running(paths)
    headless = runs_headless(args)
    if not running and (spent := spent_budget_message(paths)):
        close_all(backends)
        print(spent, file=sys.stderr)  # finished, not failed: a resume-until-done loop ends
        if args.headless or args.json:  # and its answer stands as the last run left it
            print_answer(read_snapshot(paths), args.sessions_dir, args.json)
        return 0
    if headless and not (args.headless or args.json):
        print(
            "no terminal for the TUI (nohup, ssh without -t, redirected output): running "
            "headless; `kernelbrain attach` shows it from a terminal",
            file=sys.stderr,
        )
    if not running:  # once, before any candidate runs: under which isolation they will
        settings = stopped_session_settings(paths)
        line = candidate_isolation(settings.generator, settings.backend, candidates_trusted(args))
        if line:
            print(line, file=sys.stderr)
    if not headless:
        started = None
        if not running:
            with session_folder_writes(paths):
                started = start_detached_engine(paths)
        return attach(paths, started)
    return run_headless(paths, args.sessions_dir, args.json, backends)


def stopped_session_settings(paths: SessionPaths):
    """The settings of a session no engine runs, read from its store."""
    from engine.session.store import Store, StoreError

    try:
        store = Store(paths.database, read_only=True)
    except StoreError as exc:
        raise UsageError(str(exc)) from exc
    try:
        return store.settings()
    finally:
        store.close()


def run_headless(
    paths: SessionPaths, sessions_dir: str | None = None, as_json: bool = False,
    backends: list | None = None,
) -> int:  # fmt: skip
    """Run the engine in this process until the search ends, its progress on stderr, then its
    answer on stdout (engine.cli.answer; `as_json`: one JSON line); Ctrl-C stops it with one
    line. `sessions_dir`: the --sessions-dir given, which the answer's commands repeat;
    `backends`: those started for it already (start_backends)."""
    engine = None
    try:
        engine = start_engine(paths, backends)
        note = engine.problem.interpreter_note(engine.backend.name)
        if note:
            print(note, file=sys.stderr)
        state = engine.run(on_step=search_progress())
    except KeyboardInterrupt:
        print(
            f"interrupted: session {paths.name} stopped; `kernelbrain resume {paths.name}` "
            "continues it",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        if engine is not None:
            engine.close()
            engine.store.close()
    print(progress_line(engine.last_snapshot), file=sys.stderr)
    print(f"{state}: {engine.search.schedule.stop_reason}", file=sys.stderr, flush=True)
    print_answer(engine.last_snapshot, sessions_dir, as_json)
    return 0


def start_engine(paths: SessionPaths, backends: list | None = None):
    """The session's engine, holding its lock, on `backends` when they were started for it
    (closed here if it does not start); what stops it from starting is a UsageError."""
    from engine.compose import resume_session

    with failing_start_said(backends), session_folder_writes(paths):
        return resume_session(paths, backends)


_STDERR = threading.Lock()


def say(line: str) -> None:
    """`line` to stderr whole: `bench --jobs` reports from several searches' threads at once, and
    print's line and newline, written apart, ran their lines together."""
    with _STDERR:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def search_progress():
    """A step callback that prints the search's progress line when it changed (at most every
    PROGRESS_INTERVAL_S), and once each pause what it waits for: a machine's says what failed
    and what to do."""
    last = [0.0]
    shown: list[str | None] = [None]
    told: list[str | None] = [None]

    def on_step(engine) -> None:
        snap = engine.last_snapshot
        pause = pause_message(engine) if snap["state"] == "paused" else None
        if pause and pause != told[0]:
            say(pause)
        told[0] = pause
        line, now = progress_line(snap), time.monotonic()
        if line != shown[0] and now - last[0] >= PROGRESS_INTERVAL_S:
            last[0], shown[0] = now, line
            say(line)

    return on_step


def pause_message(engine) -> str:
    name = engine.paths.name
    reason = engine.search.schedule.pause_reason
    if reason:
        return f"{name}: {reason}"
    return f"{name}: paused by a pause command; `kernelbrain unpause {name}` continues it"


def progress_line(snap: dict) -> str:
    """The search's state in one line: its device seconds in the backend's unit (gpu-s, on the
    cpu backend device-s)."""
    rungs = " ".join(f"r{r['index']}:{r['measured']}" for r in snap["rungs"])
    best = snap["best"]
    best_text = f"best {best['id']} {best['speedup']:.3f}x" if best else "best -"
    backend = snap.get("backend")
    left = ", ".join(
        f"{limit_name(k, backend)} {v:.0f}"
        for k, v in snap["budget"]["left"].items()
        if v is not None
    )
    tag = "" if snap["timings_meaningful"] else " (cpu: timings not meaningful)"
    return (
        f"[{snap['session']} step {snap['step']}] {rungs} | {best_text}{tag} | "
        f"{snap['ledger']['gpu_seconds']:.1f} {seconds_unit(backend)} | "
        f"left: {left or 'unlimited'}"
    )


def attach(paths: SessionPaths, started: subprocess.Popen | None = None) -> int:
    """The TUI on the session; `started`: the engine process just started on it."""
    from kbtui.app import run_app

    return run_app(paths, started) or 0


def cmd_stop(args) -> int:
    paths = session_of(args)
    if not engine_running(paths):
        print(f"session {paths.name} has no running engine", file=sys.stderr)
        return 0
    with session_folder_writes(paths):
        send_command(paths, "stop")
    print(f"stop sent to {paths.name}: the engine stops at its next step boundary", file=sys.stderr)
    return 0
