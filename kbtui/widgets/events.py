"""The event log: events.jsonl as it grows."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from kbtui.formatting import clock

MAX_LINES = 2000
ALARMING = ("rejected", "command_rejected", "stopped")


def event_line(event: dict) -> Text:
    """Time, kind and message; the candidate's id first unless the message names it."""
    kind, message = event.get("kind", "?"), event.get("message", "")
    candidate = event.get("candidate")
    return Text.assemble(
        (clock(event.get("ts", 0.0)), "dim"),
        " ",
        (f"{kind:<16}", "bold" if kind not in ALARMING else "bold reverse"),
        (f"{candidate} " if candidate and candidate not in message else ""),
        message,
    )


class EventLog(RichLog):
    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=MAX_LINES, wrap=False, **kwargs)

    def append(self, events: list[dict]) -> None:
        for event in events:
            self.write(event_line(event))
