"""The backend interface: where a candidate is checked and timed."""

from __future__ import annotations

from typing import Protocol

from engine.jobs import EvalJob, EvalResult
from engine.problems import Problem

BACKENDS = ("cuda", "cpu", "sim")


class Backend(Protocol):
    name: str  # "cuda" | "cpu" | "sim"
    timings_meaningful: bool
    profile_seconds: float  # what one profile is expected to cost, before any was measured

    def evaluate(self, problem: Problem, job: EvalJob) -> EvalResult:
        """Gate (when job.check) and time the candidate; never raises for a bad candidate."""
        ...

    def prepare(self, problem: Problem, sources: list[str], labels) -> None:
        """`sources` are the next candidates to be evaluated, in order: a backend may start on
        them (compile their kernels at the sizes `labels`) while it evaluates others."""
        ...

    def census(self, problem: Problem, source: str, labels, result: EvalResult) -> None:
        """Where the backend can see a GPU's launch records: reject a passed `result` whose
        forward calls at `labels` launched kernels that are not the candidate's."""
        ...

    def close(self) -> None: ...
