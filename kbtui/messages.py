"""The one message the watcher thread posts to the app: what changed in the session folder.

At most one is ever queued: the watcher waits until the app has drawn it before it looks again.
When drawing falls behind (a slow SSH link), the next look gathers everything that changed
meanwhile into one message (the newest snapshot, every new event line, the newest selection)
instead of a backlog of states that are already out of date."""

from __future__ import annotations

from textual.message import Message

from kbtui.poller import SessionChanges


class SessionChanged(Message):
    def __init__(self, changes: SessionChanges) -> None:
        super().__init__()
        self.changes = changes
