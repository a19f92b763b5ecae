"""The bench's searches: a session per search, run to its budget, summed up for the report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from engine.bench import BenchError
from engine.compose import resume_session
from engine.jobs import RungSpec
from engine.session_files import SessionPaths

NEAR_BEST = 0.02  # "reached the best": within 2% of the final best speedup
MESSAGE_CHARS = 240  # of the first rejection's message, in a search's summary


@dataclass
class SearchOutcome:
    session: str
    best_id: str | None
    best_source: str | None
    stop_reason: str | None
    progress: list  # [[gpu_seconds, best speedup], ...] each time the best changed
    gpu_seconds_total: float
    gpu_seconds_by_activity: dict  # reference, check, time, profile: the GPU held
    cpu_seconds_by_activity: dict  # compile
    wall_seconds: float
    gpu_seconds_by_rung: dict
    evaluations: int
    candidates: int
    ladder: tuple[RungSpec, ...]
    rejections: str | None = None  # rejections_said: why candidates failed, when any did

    @property
    def gpu_seconds_to_best(self) -> float | None:
        return gpu_seconds_to_best(self.progress)


def gpu_seconds_to_best(progress: list) -> float | None:
    """GPU-seconds from which on the search's best speedup stayed within 2% of its final value.
    (A best measured on a cheap rung and revised when confirmed counts from the revision.)"""
    if not progress:
        return None
    final = progress[-1][1]
    reached = progress[-1][0]
    for gpu_seconds, speedup in reversed(progress):
        if abs(speedup - final) > NEAR_BEST * final:
            break
        reached = gpu_seconds
    return reached


def rejections_said(population) -> str | None:
    """How a search's candidates were rejected: the count by reason, then the first one's reason
    and the first line of its message (what a bench keeps of a search without a passing one)."""
    rejected = [c for c in population if c.status == "rejected"]
    if not rejected:
        return None
    first = min(rejected, key=lambda c: c.seq)
    counts = ", ".join(f"{n} {why}" for why, n in Counter(c.reason for c in rejected).most_common())
    line = (first.message.splitlines() or [""])[0][:MESSAGE_CHARS]
    return f"rejected {counts}; {first.id}: {first.reason}: {line}"


def flat_ladder(ladder: tuple[RungSpec, ...]) -> tuple[RungSpec, ...]:
    """One rung, the ladder's top one: every candidate at full fidelity."""
    return (replace(ladder[-1], index=0),)


def run_search(paths: SessionPaths, on_step=None, log=lambda line: None) -> SearchOutcome:
    """Run a created session to its end (budget spent or nothing left to try). Paused by machine
    faults, it stops the bench (a BenchError says what failed): waiting would block the bench,
    and the same bench run again into the same --out resumes the search where it paused (and
    says so in `log`)."""
    engine = resume_session(paths)
    schedule = engine.search.schedule
    if schedule.step:
        where = "finished" if schedule.state == "finished" else f"at step {schedule.step}"
        log(f"{paths.name}: an earlier bench's search, resumed {where}")

    def step(engine) -> None:
        if engine.search.schedule.pause_reason:
            raise BenchError(f"{paths.name} paused: {engine.search.schedule.pause_reason}")
        if on_step is not None:
            on_step(engine)

    try:
        engine.run(on_step=step)
        search, ledger = engine.search, engine.search.ledger
        best = search.best()
        return SearchOutcome(
            session=paths.name,
            best_id=best.id if best else None,
            best_source=best.source if best else None,
            stop_reason=search.schedule.stop_reason,
            progress=[list(p) for p in search.schedule.progress],
            gpu_seconds_total=ledger.gpu_seconds,
            gpu_seconds_by_activity=dict(ledger.gpu_seconds_by_activity),
            cpu_seconds_by_activity=dict(ledger.cpu_seconds_by_activity),
            wall_seconds=ledger.wall_seconds,
            gpu_seconds_by_rung=dict(ledger.gpu_seconds_by_rung),
            evaluations=ledger.evaluations,
            candidates=len(search.population),
            ladder=search.ladder,
            rejections=rejections_said(search.population),
        )
    finally:
        engine.close()
        engine.store.close()
