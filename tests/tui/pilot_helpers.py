"""Waiting on the running app from Pilot tests, moving its Queue cursor, and reading its screen
as text."""

from __future__ import annotations

import io
import time

from rich.console import Console

from kbtui.widgets.budget import BudgetPane
from kbtui.widgets.queue import QueueTable

ENGINE_TIMEOUT_S = 20.0  # a real engine answers within a step; a loaded machine is slow


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


async def select(pilot, candidate_id: str) -> None:
    """Put the Queue's cursor on a candidate and wait until its detail is on screen."""
    table = pilot.app.query_one(QueueTable)
    table.move_cursor(row=table.get_row_index(candidate_id))
    await wait_until(pilot, lambda: loaded(pilot.app) and pilot.app.selected_id == candidate_id)


def screen_text(app) -> list[str]:
    """The screen's lines as the user reads them: what export_screenshot draws, as plain text."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, force_terminal=True
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().splitlines()


async def budget_pane(app, pilot) -> BudgetPane:
    """The Budget pane, brought up (key 4) once the app has loaded the session."""
    await settle(pilot)
    await pilot.press("4")
    await pilot.pause()
    return app.query_one(BudgetPane)
