"""Fixtures for the TUI tests: a session made by a real sim run (once per test run, copied
for each test), one on two simulated devices, one on the cpu backend, a real engine attached to
a copy, and a fixed clock zone."""

from __future__ import annotations

import shutil
import time

import pytest
from live_engine import LiveEngine
from sim_session import (
    CPU_NAME,
    NAME,
    TWO_DEVICE_NAME,
    give_recorded_profile,
    normalise_wall_clock,
    run_cpu_session,
    run_sim_session,
    run_two_device_session,
)

from engine.session_files import SessionPaths, read_snapshot


@pytest.fixture(autouse=True)
def utc_clock(monkeypatch):
    """Event times render as UTC, so snapshots match on any machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (marked anyio) run on asyncio, Textual's loop."""
    return "asyncio"


@pytest.fixture(scope="session")
def sim_session_template(tmp_path_factory) -> SessionPaths:
    """The finished sim session, its best candidate holding the recorded H200 profile, with
    its wall-clock values normalised. Tests get copies (`session`), never this folder."""
    paths = run_sim_session(tmp_path_factory.mktemp("sim-run"))
    give_recorded_profile(paths, read_snapshot(paths)["best"]["id"])
    normalise_wall_clock(paths)
    return paths


@pytest.fixture
def session(sim_session_template, tmp_path) -> SessionPaths:
    """A copy of the finished sim session; no engine runs on it."""
    return SessionPaths(shutil.copytree(sim_session_template.root, tmp_path / NAME))


@pytest.fixture(scope="session")
def two_device_template(tmp_path_factory) -> SessionPaths:
    """A sim session on two devices, each with an evaluation planned when its engine ended,
    with its wall-clock values normalised. Tests get copies (`two_device_session`)."""
    paths = run_two_device_session(tmp_path_factory.mktemp("sim-two"))
    normalise_wall_clock(paths)
    return paths


@pytest.fixture
def two_device_session(two_device_template, tmp_path) -> SessionPaths:
    """A copy of the two-device sim session; no engine runs on it."""
    return SessionPaths(shutil.copytree(two_device_template.root, tmp_path / TWO_DEVICE_NAME))


@pytest.fixture(scope="session")
def cpu_session_template(tmp_path_factory) -> SessionPaths:
    """A finished search on the cpu backend. Tests get copies (`cpu_session`)."""
    return run_cpu_session(tmp_path_factory.mktemp("cpu-run"))


@pytest.fixture
def cpu_session(cpu_session_template, tmp_path) -> SessionPaths:
    """A copy of the finished cpu session; no engine runs on it."""
    return SessionPaths(shutil.copytree(cpu_session_template.root, tmp_path / CPU_NAME))


@pytest.fixture
def live_engine(session):
    """A real engine paused on the copied session; stopped after the test."""
    engine = LiveEngine.start_paused(session)
    try:
        yield engine
    finally:
        engine.stop()
