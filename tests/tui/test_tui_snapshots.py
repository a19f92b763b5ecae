"""Snapshots of each pane drawn from the sim session (pytest --snapshot-update to renew).

The 80x24 panes show the finished session as it is after its run: no engine, so the status
line offers to resume; the Budget pane of a session on two devices adds a row for each. The
wide layout shows a real engine holding the session paused."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from pilot_helpers import select, settle

from engine.session_files import read_candidate, read_snapshot
from kbtui.app import KernelBrainApp

PROFILER_UNAVAILABLE = "c0032"  # the first profile the budget allowed: the sim cannot profile
NOT_PROFILED_YET = "c0010"  # never climbed past rung 0; none of its strategy was profiled
EVALUATING = "c0028"  # planned on a device of the two-device session when its engine ended
SIZES = {"80x24": (80, 24), "120x40": (120, 40), "200x60": (200, 60)}


def showing(*keys: str, candidate: str | None = None):
    async def run_before(pilot) -> None:
        await settle(pilot)
        if candidate:
            await select(pilot, candidate)
        if keys:
            await pilot.press(*keys)
        await pilot.pause(0.1)

    return run_before


PANE_KEYS = {
    "noise": (),
    "profiler": ("2",),
    "diff_parent": ("3",),
    "diff_reference": ("3", "d", "d"),
    "budget": ("4",),
    "events": ("5",),
    "help": ("question_mark",),
}


@pytest.mark.parametrize("keys", PANE_KEYS.values(), ids=PANE_KEYS.keys())
def test_pane_at_80x24(snap_compare, session, keys):
    assert snap_compare(KernelBrainApp(session), terminal_size=(80, 24), run_before=showing(*keys))


def test_profiler_unavailable(snap_compare, session):
    assert read_candidate(session, PROFILER_UNAVAILABLE)["profile"]["status"] == "unavailable"
    app = KernelBrainApp(session)
    assert snap_compare(
        app, terminal_size=(80, 24), run_before=showing("2", candidate=PROFILER_UNAVAILABLE)
    )


def test_profiler_not_profiled_yet(snap_compare, session):
    assert read_candidate(session, NOT_PROFILED_YET)["profile"] is None
    app = KernelBrainApp(session)
    assert snap_compare(
        app, terminal_size=(80, 24), run_before=showing("2", candidate=NOT_PROFILED_YET)
    )


def test_budget_pane_shows_each_device_of_a_two_device_session(snap_compare, two_device_session):
    app = KernelBrainApp(two_device_session)
    assert snap_compare(app, terminal_size=(80, 24), run_before=showing("4"))


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_an_evaluating_row_at_each_size(snap_compare, two_device_session, size):
    """The Queue with an evaluating row selected, every column whole (test_tui_sizes reads the
    same screens as text): narrow and short, narrow and tall, wide."""
    rows = {row["id"]: row for row in read_snapshot(two_device_session)["candidates"]}
    assert rows[EVALUATING]["status"] == "evaluating"
    app = KernelBrainApp(two_device_session)
    assert snap_compare(app, terminal_size=size, run_before=showing(candidate=EVALUATING))


def test_wide_terminal_puts_the_queue_beside_the_panes(snap_compare, live_engine):
    app = KernelBrainApp(live_engine.paths)
    assert snap_compare(app, terminal_size=(160, 40), run_before=showing("3"))


def test_snapshots_are_drawn_by_the_pinned_textual():
    """pyproject.toml pins Textual exactly: another version draws other SVGs, and a snapshot
    diff should mean the TUI changed, not the library."""
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pins = [d for d in project["project"]["dependencies"] if d.startswith("textual")]
    assert pins == [f"textual=={version('textual')}"]
