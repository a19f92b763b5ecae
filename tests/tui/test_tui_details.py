"""Small things a user sees: what "best" and the score mean, Pause or Unpause in the footer,
unpause and an engine's resume told apart in the event log, event lines whole at 80 and 160
columns, the status line at 80x24, and the profile a candidate shares with its strategy."""

from __future__ import annotations

import time

import pytest
from live_engine import command_record
from pilot_helpers import ENGINE_TIMEOUT_S, select, settle, wait_until

from engine.session_files import BEST_CAVEAT, BEST_MEANING, read_events, send_command
from kbtui.app import KernelBrainApp
from kbtui.screens.help import HelpScreen, help_content
from kbtui.widgets.events import EventLog
from kbtui.widgets.noise import NoisePane
from kbtui.widgets.profiler import ProfilerPane
from kbtui.widgets.status import SessionStatus

FAST_POLL = 0.05
FASTER_BELOW = "c0019"  # a speedup of 1.21 below c0023's 1.11: its noisy timings cost it score
SHARES_PROFILE = "c0037"  # matvec.row_block, whose profile is the best's (c0007)
pytestmark = pytest.mark.anyio


def text_of(widget) -> str:
    return str(widget.query_one("Static").content)


def words(text: str) -> str:
    return " ".join(text.split())


async def test_the_noise_pane_says_why_a_faster_row_ranks_below(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, FASTER_BELOW)
        assert text_of(app.query_one(NoisePane)).split("\n")[1] == (
            "score 1.05 = speedup 1.21× × 0.87 (bonus per rung, penalty for CV 10.8%)"
        )
        # the status line's best says what it is where it stands, in the help's words
        assert app.query_one(SessionStatus).tooltip == f"best: {BEST_MEANING}; {BEST_CAVEAT}"
    assert f"best {BEST_MEANING.capitalize()}: {BEST_CAVEAT}" in words(help_content().plain)


async def test_the_footer_offers_unpause_while_paused(live_engine):
    app = KernelBrainApp(live_engine.paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.snapshot["state"] == "paused"
        assert app.screen.active_bindings["space"].binding.description == "Unpause"
        await pilot.press("space")
        await wait_until(pilot, lambda: app.snapshot["state"] == "running", ENGINE_TIMEOUT_S)
        await pilot.pause()
        assert app.screen.active_bindings["space"].binding.description == "Pause"


async def test_unpause_and_an_engine_resume_read_differently(live_engine):
    paths = live_engine.paths
    unpause = send_command(paths, "unpause")
    await_applied(paths, unpause)
    [event] = [e for e in read_events(paths) if e["command"] == unpause["id"]]
    assert (event["kind"], event["message"]) == ("command_applied", "unpaused: the search goes on")
    engine_started = [e for e in read_events(paths) if e["kind"] == "resumed"]
    assert engine_started[-1]["message"] == "engine resumed on sim"


def await_applied(paths, command: dict) -> None:
    deadline = time.monotonic() + ENGINE_TIMEOUT_S
    while command_record(paths, command["id"]) is None:
        assert time.monotonic() < deadline, "the engine did not apply the command"
        time.sleep(0.05)


@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80", "160"])
async def test_event_lines_wrap_and_keep_every_word(session, size):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("5")
        await pilot.pause(0.2)
        log = app.query_one(EventLog)
        shown = words(" ".join(line.text for line in log.lines))
        assert max(line.cell_length for line in log.lines) <= log.scrollable_content_region.width
    for event in read_events(session)[-len(log.lines) // 2 :]:
        candidate, message = event["candidate"], event["message"]
        said = message if not candidate or candidate in message else f"{candidate} {message}"
        assert words(f"{event['kind']} {said}") in shown


async def test_the_status_line_fits_80_columns_one_line_each(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        status = app.query_one(SessionStatus)
        assert status.size.height == 2
        lines = [line.text.strip() for line in status.render_lines(status.region.reset_offset)]
        assert lines[1] == "engine not running · r resumes it; commands wait until then"


async def test_a_candidate_shares_the_profile_of_its_strategy(session):
    app = KernelBrainApp(session, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select(pilot, SHARES_PROFILE)
        await pilot.press("2")
        assert words(text_of(app.query_one(ProfilerPane))).startswith(
            f"{SHARES_PROFILE} shares the profile of c0007: its strategy matvec.row_block is "
            "profiled once, and that profile guides its mutations"
        )


async def test_the_help_screen_stays_open_while_the_engine_publishes(live_engine):
    app = KernelBrainApp(live_engine.paths, poll_seconds=FAST_POLL)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("space")  # unpause: snapshots and events keep coming
        await pilot.press("question_mark")
        step = app.snapshot["step"]
        await wait_until(pilot, lambda: app.snapshot["step"] >= step + 2, ENGINE_TIMEOUT_S)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert f"step {app.snapshot['step']}" in str(app.query_one(SessionStatus).render())
