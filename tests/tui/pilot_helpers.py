"""Waiting on the running app from Pilot tests."""

from __future__ import annotations

import time


async def wait_until(pilot, condition, timeout: float = 5.0) -> None:
    """Let the app run until `condition()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.02)


def loaded(app) -> bool:
    """The first snapshot is drawn and the selected candidate's detail is on screen."""
    return (
        app.snapshot is not None
        and app.selection is not None
        and app.selection.candidate_id == app.selected_id
        and app.engine_is_running is not None
    )


async def settle(pilot) -> None:
    await wait_until(pilot, lambda: loaded(pilot.app))
    await pilot.pause()
