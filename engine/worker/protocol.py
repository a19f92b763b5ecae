"""What crosses between the engine and its judge process: a typed request, its timing plan and the
judge's verdict. JSON on the wire (`to_wire`, `from_wire`); each side reads fields, not keys."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Runner owners (engine.worker.runner_pool): the project's code shares one runner; a request of
# FRESH gets a runner of its own, closed after it; any other owner is one candidate's.
SHARED, FRESH = "shared", "fresh"


@dataclass(frozen=True)
class SizeSpec:
    label: str
    params: dict


@dataclass(frozen=True)
class TimingPlan:
    """How one evaluation times each size: warm-up calls, up to `reps` timed repetitions over
    `input_sets` rotating input sets (from `seed`), fewer where the speedup is pinned down to
    `precision` sooner (engine.timing.sequential; 0: all of them), then a re-check on a fresh
    input (`recheck_seed`)."""

    seed: int
    recheck_seed: int
    warmup: int
    reps: int
    input_sets: int
    interleave: bool = True
    precision: float = 0.0


@dataclass(frozen=True)
class JudgeRequest:
    """One evaluation (or, on device "compile", one compile ahead) of `source` on `problem_path`:
    checked on `check_seeds` at `check_sizes` (every size where none is named), then timed at
    every size when `timing` is given. `runner` says whose runner it runs in
    (engine.worker.runner_pool); `triton_cache` keeps the candidate's kernels between runners."""

    problem_path: str
    source: str
    device: str
    sizes: tuple[SizeSpec, ...]
    replaces: tuple[str, ...] = ()
    tolerance: float | dict | None = None
    operators: int = 1  # compute operators in the Model's forward: the roundings a kernel may add
    precision_policy: str = "strict"
    allowed_torch_ops: tuple[str, ...] = ()
    draws_random: bool = False  # the Problem's: calls start from one seed, candidates may draw
    check_seeds: tuple[int, ...] = ()
    check_sizes: tuple[str, ...] = ()
    model_seed: int = 0
    timing: TimingPlan | None = None
    triton_cache: str | None = None
    runner: str = FRESH
    deadlines: dict = field(default_factory=dict)  # seconds by phase; the judge's defaults else

    def to_wire(self) -> dict:
        return asdict(self)

    @classmethod
    def from_wire(cls, wire: dict) -> JudgeRequest:
        timing = wire.get("timing")
        return cls(**{
            **wire,
            "sizes": tuple(SizeSpec(**s) for s in wire["sizes"]),
            "replaces": tuple(wire.get("replaces", ())),
            "allowed_torch_ops": tuple(wire.get("allowed_torch_ops", ())),
            "check_seeds": tuple(wire.get("check_seeds", ())),
            "check_sizes": tuple(wire.get("check_sizes", ())),
            "timing": TimingPlan(**timing) if timing else None,
        })  # fmt: skip


@dataclass
class Verdict:
    """The judge's word on one request. `samples`: by size label, the candidate's and the
    reference's timed calls in ms ({"cand": [...], "ref": [...]}); `fatal`: the judge cannot go
    on (the engine restarts it); `gpu_seconds`: by activity, added by the engine's client."""

    passed: bool
    reason: str | None = None
    message: str = ""
    error: float | None = None
    tolerance: float | None = None
    precision: str = "fp32"
    references: dict = field(default_factory=dict)  # {"banked": n, "computed": n}
    samples: dict = field(default_factory=dict)
    fatal: bool = False
    gpu_seconds: dict = field(default_factory=dict)

    def to_wire(self) -> dict:
        return asdict(self)

    @classmethod
    def from_wire(cls, wire: dict) -> Verdict:
        return cls(**wire)
