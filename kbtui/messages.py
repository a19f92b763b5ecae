"""Messages the watcher thread posts to the app, named for what happened.

Snapshot, status and selection messages override `can_replace`: when the UI falls behind (a
slow SSH link), a newer one replaces an older one still queued, so only the latest is drawn."""

from __future__ import annotations

from textual.message import Message

from kbtui.poller import Selection


class SnapshotPublished(Message):
    def __init__(self, snapshot: dict) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotPublished)


class EventsAppended(Message):
    """New lines of events.jsonl; never replaced, so no event is lost."""

    def __init__(self, events: list[dict]) -> None:
        super().__init__()
        self.events = events


class EngineStatusChanged(Message):
    def __init__(self, running: bool) -> None:
        super().__init__()
        self.running = running

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineStatusChanged)


class SelectionLoaded(Message):
    def __init__(self, selection: Selection) -> None:
        super().__init__()
        self.selection = selection

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SelectionLoaded)
