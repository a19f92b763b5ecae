"""Snapshots of each pane drawn from the fixture session (pytest --snapshot-update to renew)."""

from __future__ import annotations

import pytest
from pilot_helpers import settle, wait_until

from kbtui.app import KernelBrainApp


def showing(*keys: str):
    async def run_before(pilot) -> None:
        await settle(pilot)
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


def test_wide_terminal_puts_the_queue_beside_the_panes(snap_compare, session):
    assert snap_compare(KernelBrainApp(session), terminal_size=(160, 40), run_before=showing("3"))


def test_profiler_unavailable(snap_compare, session):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("down", "2")  # c0002: ncu missing
        await wait_until(pilot, lambda: pilot.app.selection.candidate_id == "c0002")
        await pilot.pause(0.1)

    assert snap_compare(KernelBrainApp(session), terminal_size=(80, 24), run_before=run_before)


def test_stopped_engine_offers_resume(snap_compare, session):
    session.lock.unlink()
    assert snap_compare(KernelBrainApp(session), terminal_size=(80, 24), run_before=showing())
