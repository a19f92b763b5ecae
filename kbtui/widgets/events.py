"""The event log: events.jsonl as it grows. A long message wraps at word boundaries under
itself, so a candidate id is never cut."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import RichLog

from kbtui.formatting import clock

MAX_LINES = 2000
ALARMING = (
    "rejected",
    "rerun",
    "machine_fault",
    "reference_failed",
    "paused",
    "command_rejected",
    "stopped",
)
KIND_WIDTH = 16


def event_line(event: dict) -> Table:
    """Time, kind and message; the candidate's id first unless the message names it."""
    kind, message = event.get("kind", "?"), event.get("message", "")
    candidate = event.get("candidate")
    line = Table.grid(padding=(0, 1))
    line.add_column(no_wrap=True)
    line.add_column(no_wrap=True, min_width=KIND_WIDTH)
    line.add_column(ratio=1)
    line.add_row(
        Text(clock(event.get("ts", 0.0)), "dim"),
        Text(kind, "bold" if kind not in ALARMING else "bold reverse"),
        Text(f"{candidate} {message}" if candidate and candidate not in message else message),
    )
    return line


class EventLog(RichLog):
    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=MAX_LINES, min_width=0, **kwargs)

    def append(self, events: list[dict]) -> None:
        for event in events:
            self.write(event_line(event))
