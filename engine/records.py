"""The search's records of its candidates, one each: what the store keeps, the scheduler ranks
and the snapshot publishes (on the bottom floor, so that every layer may read them)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


def shape_result(speedup: float, low: float, high: float) -> list[float]:
    """One size's entry of RungResult.shapes, to six places (stored with every record)."""
    return [round(speedup, 6), round(low, 6), round(high, 6)]


@dataclass
class RungResult:
    """A candidate's summary at one rung (the raw samples live in the evaluations table)."""

    score: float
    speedup: float
    low: float  # speedup interval (geometric mean of the per-shape 95% intervals)
    high: float
    cv: float
    samples: int
    # Per size label: [speedup, interval low, interval high]. Empty in sessions stored before
    # results were kept per shape (engine.session.store fills it from their evaluations).
    shapes: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Candidate:
    id: str
    seq: int
    sha256: str
    parent: str | None
    origin: str
    params: dict
    note: str
    source: str
    created_step: int
    rung: int = 0  # the rung it waits for, or was last measured at
    # One of engine.session_files.CANDIDATE_STATUSES; docs/session-format.md says what each means.
    status: str = "queued"
    results: dict[int, RungResult] = field(default_factory=dict)
    promoted_from: list[int] = field(default_factory=list)  # rungs it has left upwards
    pinned: bool = False
    vetoed: bool = False
    reason: str | None = None
    message: str = ""
    error: float | None = None
    gpu_seconds: float = 0.0  # spent evaluating it, all rungs
    precision: str | None = None
    profile: dict | None = None
    census: dict | None = None  # the kernel census, once it is the search's answer

    @property
    def best_result(self) -> RungResult | None:
        return self.results[max(self.results)] if self.results else None

    @property
    def score(self) -> float | None:
        best = self.best_result
        return best.score if best else None

    def to_row(self) -> dict:
        """The record as JSON-ready data. It shares the record's lists and dicts (no deep copy:
        the store serializes it at once, and copying cost more than writing)."""
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["results"] = {str(k): dict(vars(v)) for k, v in self.results.items()}
        return row

    @classmethod
    def from_row(cls, row: dict) -> Candidate:
        row = dict(row)
        row["results"] = {int(k): RungResult(**v) for k, v in row["results"].items()}
        return cls(**row)
