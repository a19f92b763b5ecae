"""Fixtures for the TUI tests: a session folder on disk and a fixed clock zone."""

from __future__ import annotations

import time

import pytest
from fixture_session import make_fixture_session

from engine.session_files import SessionPaths


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


@pytest.fixture
def session(tmp_path) -> SessionPaths:
    return make_fixture_session(tmp_path / "rms-demo")
