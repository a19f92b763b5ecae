"""The Queue and the Diff pane at the sizes people use: the Queue opens at its top and stays there
while better rows arrive, Home and End reach its ends; the Diff shows the changed hunks (the
whole file on request), scrolls long lines instead of wrapping them, and fills the screen on
request."""

from __future__ import annotations

import pytest
from pilot_helpers import ENGINE_TIMEOUT_S, select, settle, wait_until
from sim_session import engine_cli
from textual.containers import ScrollableContainer
from textual.widgets import Static, TabbedContent

from engine.session_files import SessionPaths, read_candidate, send_command
from kbtui.app import KernelBrainApp
from kbtui.widgets.diff import DiffPane
from kbtui.widgets.queue import QueueTable

FAST_POLL = 0.05
PRUNED = "c0018"  # pruned at rung 1 in the sim run, in the middle of the Queue
BEST, BEST_PARENT = "c0007", "c0001"  # the sim run's best candidate and its parent
pytestmark = pytest.mark.anyio


def top_row(table: QueueTable) -> str:
    return table.ordered_rows[0].key.value


async def test_queue_stays_at_its_top_while_better_rows_arrive(tmp_path):
    """A run's first candidates are soon outscored: the cursor stays on the top row (and the view
    at the top) until the user moves it, instead of following the first candidate down."""
    engine_cli(
        "run", "matvec", "--backend", "sim", "--headless", "--budget", "3evals",
        "--session", "growing", sessions_dir=tmp_path,
    )  # fmt: skip
    paths = SessionPaths(tmp_path / "growing")
    app = KernelBrainApp(paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        first = app.selected_id
        send_command(paths, "budget", amount="+60evals")
        await pilot.press("r")
        await wait_until(
            pilot,
            lambda: app.snapshot["ledger"]["evaluations"] == 63 and app.engine_is_running is False,
            ENGINE_TIMEOUT_S,
        )
        table = app.query_one(QueueTable)
        await wait_until(pilot, lambda: app.selected_id == top_row(table))
        assert top_row(table) != first  # better candidates came in above the first
        assert (table.cursor_row, table.scroll_y) == (0, 0)


async def test_home_and_end_reach_the_ends_of_the_queue(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.query_one(QueueTable)
        await select(pilot, PRUNED)
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1 > 0
        await pilot.press("home")
        assert table.cursor_row == 0
        await wait_until(pilot, lambda: app.selected_id == top_row(table))


def diff_lines(app) -> list[str]:
    """The Diff pane's body, line by line, as drawn (below the title)."""
    return str(app.query_one(DiffPane).query(Static).last().content).split("\n")


def source_lines(paths, candidate_id: str) -> int:
    return len(read_candidate(paths, candidate_id)["source"].splitlines())


async def test_diff_shows_the_changed_hunk_and_the_whole_file_on_request(session):
    """At 140 columns the Diff pane is 54 wide: it shows the two changed lines of the best with
    up to three lines of context around them (the file ends one line after them), one line per
    source line (long lines scroll sideways); `w` shows the whole file, `w` again the changes."""
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        assert app.selected_id == BEST and app.diff_target == "parent"
        lines = diff_lines(app)
        assert lines[0].strip() == "⋯ 51 unchanged lines"
        assert [line[10] for line in lines[1:]] == [" ", " ", " ", "-", "-", "+", "+", " "]
        assert "BLOCK_K=1024" in lines[4] and "num_stages=3" in lines[5]
        assert "BLOCK_K=512" in lines[6] and "num_stages=2" in lines[7]
        body = app.query_one(DiffPane).query_one(ScrollableContainer)
        assert body.max_scroll_x > 0  # the long lines scroll instead of wrapping

        await pilot.press("w")
        await pilot.pause()
        assert len(diff_lines(app)) == source_lines(session, BEST) + 2  # two lines changed
        await pilot.press("w")
        await pilot.pause()
        assert len(diff_lines(app)) == len(lines)


async def test_m_fills_the_screen_with_the_panes_and_back(session):
    """Full screen, the diff has room for both sides; the keys scroll it; `m` again (or escape)
    brings the Queue back, with the keys."""
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(220, 30)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        assert "│" not in diff_lines(app)[1]  # beside the Queue, its longest line needs one column
        await pilot.press("m")
        await pilot.pause()
        assert app.screen.maximized is app.query_one(TabbedContent)
        assert not app.query_one(QueueTable).has_focus
        left, right = diff_lines(app)[1].split("│")
        assert left.split()[0] == right.split()[0] == "52"  # side by side
        await pilot.press("m")
        await pilot.pause()
        assert app.screen.maximized is None and app.query_one(QueueTable).has_focus
        await pilot.press("m", "escape")
        await pilot.pause()
        assert app.screen.maximized is None and app.query_one(QueueTable).has_focus


async def test_first_d_shows_the_parent_and_the_next_switches(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        assert app.query_one(TabbedContent).active == "diff"
        assert app.diff_target == "parent"
        assert str(app.query_one(DiffPane)._title.content).startswith(f"parent {BEST_PARENT} →")
        await pilot.press("d")
        assert app.diff_target == "best"


def test_full_screen_diff_side_by_side(snap_compare, session):
    async def full_screen_diff(pilot) -> None:
        await settle(pilot)
        await pilot.press("3", "m")
        await pilot.pause(0.2)

    app = KernelBrainApp(session)
    assert snap_compare(app, terminal_size=(220, 24), run_before=full_screen_diff)
