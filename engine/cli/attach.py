"""`kernelbrain attach SESSION`: open the TUI on a session, running or finished."""

from __future__ import annotations

from pathlib import Path

from engine.cli import UsageError
from engine.session_files import SessionError, SessionPaths, find_session


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
    """The session folder at path `session`, or the session named so; a UsageError says where
    it looked and which sessions are there, or that the folder holds no session."""
    folder = Path(session)
    if folder.is_dir() and folder.parent != Path("."):
        paths = SessionPaths(folder)
        if not (paths.database.is_file() or paths.snapshot.is_file()):
            raise UsageError(
                f"{folder} is not a KernelBrain session (it has no state.duckdb): give a "
                "session's name or the folder `kernelbrain run` made"
            )
        return paths
    try:
        return find_session(session, sessions_dir, published=True)
    except SessionError as exc:
        raise UsageError(str(exc)) from exc


def attach(args) -> int:
    paths = resolve_session(args.session, args.sessions_dir)
    from kbtui.app import run_app  # Textual loads for this command only

    return run_app(paths)
