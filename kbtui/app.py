"""The KernelBrain app: panes over one session folder, fed by a file-watcher thread."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterable
from functools import partial

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Container
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from engine.session_files import (
    ExportError,
    SessionPaths,
    send_command,
    spent_budget_message,
    start_detached_engine,
)
from kbtui.actions import PANES, USER_ACTIONS, key_bindings
from kbtui.messages import SessionChanged
from kbtui.operations import export_candidate
from kbtui.pending import Acknowledgement, PendingCommands
from kbtui.poller import DIFF_TARGETS, EngineState, Selection, SessionPoller, next_diff_target
from kbtui.screens.help import HelpScreen
from kbtui.widgets.budget import BudgetPane
from kbtui.widgets.diff import DiffPane
from kbtui.widgets.events import EventLog
from kbtui.widgets.noise import NoisePane
from kbtui.widgets.profiler import ProfilerPane
from kbtui.widgets.queue import CandidateSelected, QueueTable
from kbtui.widgets.status import SessionStatus

# Four looks a second: quick enough to feel live, cheap enough over a slow link.
POLL_SECONDS = 0.25
BUDGET_STEP = "+10m"


class KernelBrainApp(App[None]):
    """Attach to a session; quitting leaves the engine running."""

    CSS_PATH = "app.tcss"
    TITLE = "KernelBrain"
    BINDINGS = key_bindings()
    ALLOW_IN_MAXIMIZED_VIEW = "#status, Footer"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (140, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]

    def __init__(
        self,
        paths: SessionPaths,
        poll_seconds: float = POLL_SECONDS,
        started: subprocess.Popen | None = None,
    ) -> None:
        """`started`: an engine process just started on the session (by `kernelbrain run`)."""
        super().__init__()
        self.paths = paths
        self.poll_seconds = poll_seconds
        self.poller = SessionPoller(paths)
        if started is not None:
            self.poller.follow(started)
        self.pending = PendingCommands()
        self.snapshot: dict | None = None
        self.engine: EngineState | None = None  # unknown until the first poll
        self.selection: Selection | None = None
        self.diff_target = DIFF_TARGETS[0]
        self.selected_id: str | None = None
        self._wake = threading.Event()  # look now: the selection changed, or the app closes
        self._drawn = threading.Event()  # the app has drawn the last SessionChanged

    def compose(self) -> ComposeResult:
        yield SessionStatus(id="status")
        with Container(id="main"):
            yield QueueTable(id="queue")
            with TabbedContent(id="panes"):
                with TabPane("Noise", id="noise"):
                    yield NoisePane()
                with TabPane("Profiler", id="profiler"):
                    yield ProfilerPane()
                with TabPane("Diff", id="diff"):
                    yield DiffPane()
                with TabPane("Budget", id="budget"):
                    yield BudgetPane()
                with TabPane("Events", id="events"):
                    yield EventLog()
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = self.paths.name
        self._show_status()
        self.watch(self.screen, "maximized", self._maximized_changed, init=False)
        self.watch_session()

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "watcher")
        self._wake.set()
        self._drawn.set()

    # The watcher: all file I/O happens here, on a thread that never touches a widget.

    @work(thread=True, exclusive=True, group="watcher", name="session watcher", exit_on_error=False)
    def watch_session(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            changes = self.poller.poll(self.selected_id)
            if changes:
                self._drawn.clear()
                self.post_message(SessionChanged(changes))
                while not (self._drawn.wait(self.poll_seconds) or worker.is_cancelled):
                    pass  # one message in flight: what changes meanwhile comes in the next
            self._wake.wait(self.poll_seconds)
            self._wake.clear()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.notify(
                f"{event.worker.name} failed: {event.worker.error!r}; restart the TUI to retry",
                severity="error",
                timeout=30,
            )

    # Drawing the news: each part updates the widgets it concerns, in place.

    def on_session_changed(self, message: SessionChanged) -> None:
        changes = message.changes
        try:
            self._show_changes(changes)
        except NoMatches:
            pass  # the app is closing: the screen that held the panes is gone
        finally:
            self._drawn.set()

    def _show_changes(self, changes) -> None:
        if changes.snapshot is not None:
            self._show_snapshot(changes.snapshot)
        if changes.events:
            self.query_one(EventLog).append(changes.events)
            self._settle(self.pending.acknowledge(events=changes.events))
        if changes.engine is not None:
            self._show_engine(changes.engine)
        if changes.selection is not None:
            self._show_selection(changes.selection)

    def _show_snapshot(self, snapshot: dict) -> None:
        state_changed = (self.snapshot or {}).get("state") != snapshot.get("state")
        self.snapshot = snapshot
        if state_changed:
            self.refresh_bindings()  # the footer offers Pause or Unpause
        queue = self.query_one(QueueTable)
        total = snapshot.get("candidates_total", len(snapshot.get("candidates", [])))
        queue.show(snapshot.get("candidates") or [], total, self.pending)
        self.query_one(BudgetPane).show(snapshot)
        self._settle(self.pending.acknowledge(applied=snapshot.get("commands")))
        self._show_status()

    def _show_engine(self, engine: EngineState) -> None:
        if engine.failure and engine.failure != (self.engine and self.engine.failure):
            self.notify(f"the engine failed: {engine.failure}", severity="error", timeout=30)
        self.engine = engine
        self._show_status()
        self.refresh_bindings()

    @property
    def engine_is_running(self) -> bool | None:
        return None if self.engine is None else self.engine.phase == "running"

    def _show_selection(self, selection: Selection) -> None:
        if selection.candidate_id != self.selected_id:
            return
        self.selection = selection
        row = self.query_one(QueueTable).rows_by_id.get(selection.candidate_id)
        self.query_one(NoisePane).show(selection.candidate_id, selection.detail, row)
        self.query_one(ProfilerPane).show(selection)
        self.query_one(DiffPane).show(selection, self.diff_target)

    def on_candidate_selected(self, message: CandidateSelected) -> None:
        self.selected_id = message.candidate_id
        self._wake.set()

    # Actions, named in kbtui.actions.

    def action_pin(self) -> None:
        self._send_for_selected("pin")

    def action_unpin(self) -> None:
        self._send_for_selected("unpin")

    def action_veto(self) -> None:
        self._send_for_selected("veto")

    def action_pause(self) -> None:
        self._send("pause")

    def action_unpause(self) -> None:
        self._send("unpause")

    def action_add_budget(self) -> None:
        self._send("budget", amount=BUDGET_STEP)

    def action_export(self) -> None:
        if self.selected_id is None:
            self.notify("select a candidate to export", severity="warning")
            return
        try:
            target = export_candidate(self.paths, self.selected_id)
        except (ExportError, OSError) as error:
            self.notify(f"export failed: {error}", severity="error")
            return
        self.notify(f"exported {self.selected_id} to {target.resolve()}", timeout=15)

    def action_cycle_diff(self) -> None:
        """The first press shows the Diff pane as it is (against the parent when first opened);
        each press while it shows switches the target."""
        panes = self.query_one(TabbedContent)
        if panes.active == "diff":
            self.diff_target = next_diff_target(self.diff_target)
            if self.selection is not None:
                self.query_one(DiffPane).show(self.selection, self.diff_target)
        panes.active = "diff"

    def action_toggle_whole_file(self) -> None:
        self.query_one(DiffPane).toggle_whole_file()
        self.query_one(TabbedContent).active = "diff"

    def action_toggle_maximize(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        panes = self.query_one(TabbedContent)
        self.screen.maximize(panes)
        # Keys scroll the pane while it fills the screen; the Queue has them back after.
        scrollable = [w for w in panes.active_pane.walk_children() if w.focusable]
        if scrollable:
            scrollable[0].focus()

    def _maximized_changed(self, maximized) -> None:
        if maximized is None:
            self.query_one(QueueTable).focus()

    def action_cycle_sort(self) -> None:
        self.query_one(QueueTable).cycle_sort()

    def action_resume_engine(self) -> None:
        if self.engine.phase == "starting":
            self.notify("the engine is starting: it runs in a few seconds")
            return
        if spent := spent_budget_message(self.paths):
            self.notify(spent, severity="warning")
            return
        try:
            self.poller.follow(start_detached_engine(self.paths))
        except OSError as error:
            self.notify(f"could not start the engine: {error}", severity="error")
            return
        self._show_engine(EngineState("starting"))
        self.notify(f"resuming {self.paths.name}; its output goes to {self.paths.log}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_show_pane(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "resume_engine":
            return self.engine is not None and self.engine.phase != "running"
        if action in ("pause", "unpause"):
            paused = (self.snapshot or {}).get("state") == "paused"
            return paused == (action == "unpause")
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for user_action in USER_ACTIONS:
            if user_action.action not in ("help", "quit"):
                callback = partial(self.run_action, user_action.action)
                yield SystemCommand(user_action.title, user_action.help, callback)
        for pane in PANES:
            yield SystemCommand(
                f"Show {pane}",
                f"Show the {pane.title()} pane",
                partial(self.action_show_pane, pane),
            )

    # Commands to the engine.

    def _send_for_selected(self, command: str) -> None:
        if self.selected_id is None:
            self.notify(f"select a candidate to {command}", severity="warning")
            return
        self._send(command, candidate=self.selected_id)

    def _send(self, command: str, candidate: str | None = None, amount: str | None = None) -> None:
        try:
            sent = send_command(self.paths, command, candidate=candidate, amount=amount)
        except OSError as error:
            self.notify(f"{command} not sent: {error}", severity="error")
            return
        self.pending.add(sent)
        if not self.engine_is_running:
            self.notify(
                f"{command} waits in the inbox until the engine resumes", severity="warning"
            )
        self._refresh_pending()

    def _settle(self, acknowledgements: list[Acknowledgement]) -> None:
        for ack in acknowledgements:
            self.notify(
                ack.describe(), severity="information" if ack.status == "applied" else "error"
            )
        if acknowledgements:
            self._refresh_pending()

    def _refresh_pending(self) -> None:
        self.query_one(QueueTable).redraw(self.pending)
        self._show_status()

    def _show_status(self) -> None:
        self.query_one(SessionStatus).show(self.snapshot, self.engine, self.pending)


def run_app(paths: SessionPaths, started: subprocess.Popen | None = None) -> int:
    """Run the app on a session until the user quits; the engine, if any, keeps running.
    `started`: the engine process the caller has just started on it."""
    KernelBrainApp(paths, started=started).run()
    return 0
