"""The KernelBrain app: panes over one session folder, fed by a file-watcher thread."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Container
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
from kbtui.poller import DIFF_TARGETS, Selection, SessionPoller
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
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (140, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]

    def __init__(self, paths: SessionPaths, poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__()
        self.paths = paths
        self.poll_seconds = poll_seconds
        self.poller = SessionPoller(paths)
        self.pending = PendingCommands()
        self.snapshot: dict | None = None
        self.engine_is_running: bool | None = None  # unknown until the first poll
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
            if changes.snapshot is not None:
                self._show_snapshot(changes.snapshot)
            if changes.events:
                self.query_one(EventLog).append(changes.events)
                self._settle(self.pending.acknowledge(events=changes.events))
            if changes.running is not None:
                self.engine_is_running = changes.running
                self._show_status()
                self.refresh_bindings()
            if changes.selection is not None:
                self._show_selection(changes.selection)
        finally:
            self._drawn.set()

    def _show_snapshot(self, snapshot: dict) -> None:
        self.snapshot = snapshot
        queue = self.query_one(QueueTable)
        total = snapshot.get("candidates_total", len(snapshot.get("candidates", [])))
        queue.show(snapshot.get("candidates") or [], total, self.pending)
        self.query_one(BudgetPane).show(snapshot)
        self._settle(self.pending.acknowledge(applied=snapshot.get("commands")))
        self._show_status()

    def _show_selection(self, selection: Selection) -> None:
        if selection.candidate_id != self.selected_id:
            return
        self.selection = selection
        self.query_one(NoisePane).show(selection.candidate_id, selection.detail)
        self.query_one(ProfilerPane).show(selection.candidate_id, selection.detail)
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

    def action_toggle_pause(self) -> None:
        paused = (self.snapshot or {}).get("state") == "paused"
        self._send("unpause" if paused else "pause")

    def action_add_budget(self) -> None:
        self._send("budget", amount=BUDGET_STEP)

    def action_export(self) -> None:
        if self.selected_id is None:
            self.notify("select a candidate to export", severity="warning")
            return
        try:
            target = export_candidate(self.paths, self.selected_id, Path.cwd())
        except (ExportError, OSError) as error:
            self.notify(f"export failed: {error}", severity="error")
            return
        self.notify(f"wrote {target}")

    def action_cycle_diff(self) -> None:
        self.diff_target = DIFF_TARGETS[(DIFF_TARGETS.index(self.diff_target) + 1) % 3]
        if self.selection is not None:
            self.query_one(DiffPane).show(self.selection, self.diff_target)
        self.query_one(TabbedContent).active = "diff"

    def action_cycle_sort(self) -> None:
        self.query_one(QueueTable).cycle_sort()

    def action_resume_engine(self) -> None:
        if self.engine_is_running:
            self.notify("the engine is already running")
            return
        if spent := spent_budget_message(self.paths):
            self.notify(spent, severity="warning")
            return
        try:
            start_detached_engine(self.paths)
        except OSError as error:
            self.notify(f"could not start the engine: {error}", severity="error")
            return
        self.notify(f"resuming {self.paths.name}; its output goes to {self.paths.log}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_show_pane(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "resume_engine":
            return self.engine_is_running is False
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
        self.query_one(QueueTable).refresh_flags(self.pending)
        self._show_status()

    def _show_status(self) -> None:
        self.query_one(SessionStatus).show(self.snapshot, self.engine_is_running, self.pending)


def run_app(paths: SessionPaths) -> int:
    """Run the app on a session until the user quits; the engine, if any, keeps running."""
    KernelBrainApp(paths).run()
    return 0
