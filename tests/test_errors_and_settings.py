"""Errors and settings have a home (issue 33, item 10): the project's user errors share one base,
KernelBrainError, which the command line prints as one line (exit status 2) while any other
exception is a bug shown with its traceback and where to report it; and every KERNELBRAIN_*
variable is defined, typed and checked in engine.settings, which `doctor` lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import settings
from engine.bench import BenchError
from engine.cli import BUG_REPORT, EXIT_BUG, EXIT_USAGE, CommandFailed, UsageError
from engine.errors import InputError, KernelBrainError, SetupError
from engine.generate.base import GeneratorError
from engine.problems import ProblemError
from engine.search.budget import BudgetError
from engine.session.lock import SessionBusy
from engine.session.store import StoreError
from engine.session_files import ExportError, SessionError
from hints.core.merge import MergeError
from tests.cli import kernelbrain

REPO = Path(__file__).resolve().parents[1]


def test_the_user_errors_share_one_base_and_keep_their_old_ones():
    for error in (ProblemError, StoreError, BudgetError, SessionError, ExportError, SessionBusy,
                  GeneratorError, BenchError, UsageError, CommandFailed, MergeError, InputError,
                  SetupError):  # fmt: skip
        assert issubclass(error, KernelBrainError), error
    for error in (BudgetError, MergeError, InputError):  # callers catch these as ValueError
        assert issubclass(error, ValueError), error
    assert issubclass(SetupError, RuntimeError)


def handler_raising(monkeypatch, exc: Exception) -> None:
    """`kernelbrain problems` raises `exc` from its handler."""
    import engine.cli.problems

    def run(args):
        raise exc

    monkeypatch.setattr(engine.cli.problems, "run", run)


def test_a_user_error_is_one_line_and_exit_status_2(monkeypatch):
    handler_raising(monkeypatch, InputError("--gpus 'x': give a count"))
    done = kernelbrain("problems")
    assert done.returncode == EXIT_USAGE == 2
    assert done.stderr == "kernelbrain problems: --gpus 'x': give a count\n"


@pytest.mark.parametrize("bug", [RuntimeError("boom"), ValueError("boom"), KeyError("boom")])
def test_a_bug_shows_its_traceback_and_where_to_report_it(monkeypatch, bug):
    """A bare RuntimeError or ValueError is no usage error: it shows as the bug it is."""
    handler_raising(monkeypatch, bug)
    done = kernelbrain("problems")
    assert done.returncode == EXIT_BUG != EXIT_USAGE
    assert "Traceback (most recent call last)" in done.stderr
    assert f"{type(bug).__name__}: " in done.stderr and "boom" in done.stderr
    assert done.stderr.splitlines()[-1] == BUG_REPORT
    assert "kernelbrain problems: boom" not in done.stderr


def test_doctor_lists_every_variable_with_its_value_or_default():
    done = kernelbrain("doctor", env={settings.SIM_PACE: "0.5"})
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()}
    for name, setting in settings.SETTINGS.items():
        assert name in rows, name
        if name != settings.SIM_PACE:
            assert f"unset, default {setting.default_words or repr(setting.default)}" in rows[name]
    assert re.match(r"KERNELBRAIN_SIM_PACE +0\.5 - ", rows[settings.SIM_PACE])


def test_a_malformed_variable_is_one_line_naming_it():
    done = kernelbrain("doctor", env={settings.FAULT_BACKOFF_S: "abc"})
    assert done.returncode == EXIT_USAGE
    assert done.stderr == (
        "kernelbrain doctor: KERNELBRAIN_FAULT_BACKOFF_S='abc': give the first wait in seconds, "
        "0 or more\n"
    )


def test_variables_are_read_when_asked_not_at_import(monkeypatch):
    monkeypatch.delenv(settings.COMPILE_WORKERS, raising=False)
    assert settings.value(settings.COMPILE_WORKERS) == 1
    monkeypatch.setenv(settings.COMPILE_WORKERS, " 3 ")
    assert settings.value(settings.COMPILE_WORKERS) == 3
    monkeypatch.setenv(settings.COMPILE_WORKERS, "")  # blank: the default
    assert settings.value(settings.COMPILE_WORKERS) == 1
    monkeypatch.setenv(settings.JUDGES_PER_GPU, "0")
    with pytest.raises(InputError, match="KERNELBRAIN_JUDGES_PER_GPU='0': give how many"):
        settings.read_all()
    assert settings.value(settings.TRUST_CANDIDATES, {settings.TRUST_CANDIDATES: "1"}) is True
    assert settings.value(settings.TRUST_CANDIDATES, {settings.TRUST_CANDIDATES: "yes"}) is False


def test_every_variable_the_code_names_is_defined_in_settings():
    """A new KERNELBRAIN_* variable cannot be read anywhere without a line in engine.settings."""
    named = {
        (match, path.relative_to(REPO).as_posix())
        for package in ("engine", "kbtui", "hints")
        for path in (REPO / package).rglob("*.py")
        for match in re.findall(r"KERNELBRAIN_[A-Z0-9_]*[A-Z0-9]", path.read_text())
    }
    assert named, "the search found no variable at all"
    assert {(n, p) for n, p in named if n not in settings.SETTINGS} == set()
