"""`kernelbrain attach SESSION`: open the TUI on a session, running or finished."""

from __future__ import annotations

from pathlib import Path

from engine.cli import UsageError
from engine.session_files import SessionPaths, sessions_root


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "attach",
        help="open the TUI on a session (quitting it leaves the engine running)",
        description="Open the TUI on a session, running or finished. Quitting the TUI "
        "leaves the engine running.",
    )
    parser.add_argument("session", help="a session name, or the path of a session folder")
    parser.add_argument(
        "--sessions-dir",
        default=None,
        help="where sessions live (default: $KERNELBRAIN_SESSIONS or ./sessions)",
    )
    parser.set_defaults(handler=attach)


def resolve_session(session: str, sessions_dir: str | None) -> SessionPaths:
    """The session folder named `session` (or at that path); a UsageError names the choices."""
    root = sessions_root(sessions_dir)
    candidate = Path(session)
    folder = candidate if candidate.is_dir() and candidate.parent != Path(".") else root / session
    if not folder.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        choices = f"sessions there: {', '.join(known)}" if known else "there are no sessions there"
        raise UsageError(
            f"no session {session!r} in {root}/ ({choices}); `--sessions-dir` looks elsewhere"
        )
    return SessionPaths(folder)


def attach(args) -> int:
    paths = resolve_session(args.session, args.sessions_dir)
    from kbtui.app import run_app  # Textual loads for this command only

    return run_app(paths)
