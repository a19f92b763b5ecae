"""The help screen: every key, from the same registry as the bindings and the palette."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.session_files import BEST_CAVEAT, BEST_MEANING
from kbtui.actions import PANES, USER_ACTIONS

NAVIGATION = (
    ("↑ ↓", "Select a candidate in the Queue"),
    ("click", "On a Queue column title: sort by it (again: reverse)"),
    ("1-5", "Show the " + ", ".join(pane.title() for pane in PANES) + " pane"),
    ("ctrl+p", "Command palette: every action by name"),
    ("home end", "The Queue's first or last row"),
    ("escape", "Leave full screen"),
)
# What the Queue's columns and the status line's "best" mean.
LEGEND = (
    ("score", "Speedup × a bonus per rung climbed × a penalty for noisy timings (Noise pane)"),
    ("best", f"{BEST_MEANING[0].upper()}{BEST_MEANING[1:]}: {BEST_CAVEAT}"),
)


def help_content() -> Content:
    rows = [(a.key_display or a.key, a.help) for a in USER_ACTIONS] + list(NAVIGATION + LEGEND)
    width = max(len(key) for key, _ in rows) + 2
    lines = [Content.assemble((f"{key:<{width}}", "bold $text-accent"), text) for key, text in rows]
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_content())

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "KernelBrain keys"
        self.query_one("#help").border_subtitle = "esc closes"
