"""One registry of user actions: it feeds the key bindings, the footer, the help screen and
the command palette, so the four never disagree."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class UserAction:
    action: str  # the app's action_<name>
    key: str
    title: str  # footer label and command palette entry
    help: str  # one line for the help screen and the palette
    key_display: str | None = None
    footer: bool = True


USER_ACTIONS = (
    UserAction("pin", "p", "Pin", "Pin the selected candidate: it is never pruned"),
    UserAction("unpin", "u", "Unpin", "Unpin the selected candidate"),
    UserAction("veto", "v", "Veto", "Veto the selected candidate: never evaluated again"),
    UserAction("pause", "space", "Pause", "Pause the search at the next step", "␣"),
    UserAction("unpause", "space", "Unpause", "Let a paused search go on", "␣"),
    UserAction("add_budget", "plus", "+10m", "Add ten minutes of wall time to the budget", "+"),
    UserAction("export", "e", "Export", "Save the candidate in the session's folder"),
    UserAction("cycle_diff", "d", "Diff", "Diff against the parent; again: the best, reference"),
    UserAction("toggle_whole_file", "w", "Whole", "Diff the whole file or changes", footer=False),
    UserAction("toggle_maximize", "m", "Full", "Panes fill the screen, or go back", footer=False),
    UserAction("cycle_sort", "s", "Sort", "Sort the queue by the next column", footer=False),
    UserAction("resume_engine", "r", "Resume", "Start the engine again when none is running"),
    UserAction("help", "question_mark", "Help", "Show every key", "?"),
    UserAction("quit", "q", "Quit", "Leave the TUI; the engine keeps running"),
)

# Pane tabs, in the order the number keys select them.
PANES = ("noise", "profiler", "diff", "budget", "events")


def key_bindings() -> list[Binding]:
    bindings = [
        Binding(a.key, a.action, a.title, show=a.footer, key_display=a.key_display)
        for a in USER_ACTIONS
    ]
    bindings += [
        Binding(str(number), f"show_pane('{pane}')", pane.title(), show=False)
        for number, pane in enumerate(PANES, start=1)
    ]
    return bindings
