"""A session whose state.duckdb was deleted or truncated: every command that needs it says what
is left (its published files), and `export` still writes the best candidate from them."""

import shutil
import subprocess
from pathlib import Path

import pytest
from cli import kernelbrain

from engine.session_files import SessionPaths, send_command

HINT = (
    "what it published is still there: `kernelbrain export s` writes its best candidate, "
    "`kernelbrain attach s` shows it"
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    sessions = tmp_path_factory.mktemp("sessions")
    kb(sessions, "run", "matvec", "--backend", "sim", "--headless", "--budget", "6evals",
       "--session", "s")  # fmt: skip
    return sessions / "s"


def kb(sessions: Path, *args: str) -> subprocess.CompletedProcess:
    return kernelbrain(*args, "--sessions-dir", sessions)


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_damaged_database_points_to_what_is_left(finished, tmp_path, damage):
    session = Path(shutil.copytree(finished, tmp_path / "s"))
    send_command(SessionPaths(session), "budget", amount="+2evals")  # resume would go on
    database = session / "state.duckdb"
    if damage == "deleted":
        database.unlink()
    else:
        database.write_bytes(database.read_bytes()[:4096])
    for command in (["show", "s"], ["resume", "s", "--headless"]):
        out = kb(tmp_path, *command)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.rstrip().endswith(HINT)
    exported = kb(tmp_path, "export", "s")
    assert exported.returncode == 0, exported.stderr
    assert "class ModelNew" in exported.stdout
