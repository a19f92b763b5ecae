"""Commands this client sent that the engine has not acknowledged yet."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Acknowledgement:
    """The engine's answer to one command: applied or rejected, with its message."""

    command: dict
    status: str  # "applied" or "rejected"
    message: str

    def describe(self) -> str:
        target = f" {self.command['candidate']}" if self.command.get("candidate") else ""
        amount = f" {self.command['amount']}" if self.command.get("amount") else ""
        text = f"{self.command['command']}{target}{amount} {self.status}"
        return f"{text}: {self.message}" if self.message else text


class PendingCommands:
    """Tracks sent commands by id until the snapshot's `commands` or an event acknowledges them."""

    def __init__(self) -> None:
        self._by_id: dict[str, dict] = {}

    def add(self, command: dict) -> None:
        self._by_id[command["id"]] = command

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self):
        return iter(self._by_id.values())

    def for_candidate(self, candidate_id: str) -> list[str]:
        """Names of the pending commands aimed at one candidate, in the order sent."""
        return [c["command"] for c in self._by_id.values() if c.get("candidate") == candidate_id]

    def acknowledge(
        self, applied: list[dict] | None = None, events: list[dict] | None = None
    ) -> list[Acknowledgement]:
        """Settle the commands that snapshot rows or command events name; return what settled."""
        settled = []
        for row in applied or ():
            if (command := self._by_id.pop(row.get("id"), None)) is not None:
                status = row.get("status") or "applied"
                settled.append(Acknowledgement(command, status, row.get("message") or ""))
        for event in events or ():
            if event.get("kind") not in ("command_applied", "command_rejected"):
                continue
            if (command := self._by_id.pop(event.get("command"), None)) is not None:
                status = "applied" if event["kind"] == "command_applied" else "rejected"
                settled.append(Acknowledgement(command, status, event.get("message") or ""))
        return settled
