"""A generator that replays another session's candidates in the order they were created.

The flat side of the bench's ablation evaluates the very stream of sources that the ladder
search generated, so the two differ only in how they spend the budget on it.
"""

from __future__ import annotations

from pathlib import Path

from engine.generate.base import GenerationOutcome, GenerationRequest, GeneratorError, Proposal
from engine.session_files import SessionPaths


class ReplayGenerator:
    name = "replay"

    def __init__(self, source_session: str):
        self.source_session = SessionPaths(Path(source_session))
        self._stream: list[tuple[str, Proposal]] | None = None

    def stream(self) -> list[tuple[str, Proposal]]:
        """The source session's candidates, oldest first (read once, then kept)."""
        if self._stream is None:
            from engine.session.store import Store, StoreError

            if not self.source_session.database.exists():
                raise GeneratorError(
                    f"cannot replay {self.source_session.root}: it holds no session "
                    "(run the search to replay first)"
                )
            try:
                store = Store(self.source_session.database, read_only=True)
            except StoreError as exc:
                raise GeneratorError(f"cannot replay {self.source_session.root}: {exc}") from exc
            try:
                self._stream = [
                    (c.sha256, Proposal(c.source, c.origin, c.params, f"replay of {c.id}"))
                    for c in store.candidates()
                ]
            finally:
                store.close()
        return self._stream

    def preflight(self) -> None:
        if not self.stream():
            raise GeneratorError(
                f"session {self.source_session.name} generated no candidate: nothing to replay"
            )

    def propose(self, request: GenerationRequest) -> GenerationOutcome:
        """The next `count` sources not yet known (all that remain when `count` is 0)."""
        fresh = [p for sha, p in self.stream() if sha not in request.known_sha256]
        return GenerationOutcome(proposals=fresh[: request.count or len(fresh)])
