"""Value objects that cross the boundary between the engine and an evaluation backend."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

# What an evaluation's seconds went to. Compiling (the runner's start, importing the candidate,
# its first call, where Triton compiles; waiting for a compile worker) is CPU work; so is
# "precompile", the compile workers' own time, spent beside the GPU's work
# (engine.backends.compile_pool). The rest held the GPU: the judge's inputs and float64
# reference, the candidate's checked calls, its timing, and profiles.
CPU_ACTIVITIES = ("compile", "precompile")
GPU_ACTIVITIES = ("reference", "check", "time", "profile")
ACTIVITIES = CPU_ACTIVITIES + GPU_ACTIVITIES
# The reason of a result that judged nothing: the machine failed (a judge or runner that cannot
# start, memory exhausted, a lost GPU), not the candidate. Never recorded against a candidate.
MACHINE_FAULT = "machine_fault"
# The reason of a result that judged nothing because the problem's own Model failed on its inputs
# (a size its hidden state does not fit, a matrix its factorization refuses): the problem's
# fault, not the candidate's; never recorded against a candidate, and the search pauses.
REFERENCE_FAILED = "reference_failed"


def normalized_source(source: str) -> str:
    """Source with trailing spaces and blank-line runs removed: duplicates hash the same."""
    lines = [line.rstrip() for line in source.strip().splitlines()]
    return "\n".join(line for line in lines if line) + "\n"


def source_sha256(source: str) -> str:
    return hashlib.sha256(normalized_source(source).encode()).hexdigest()


@dataclass(frozen=True)
class RungSpec:
    """How hard one rung of the ladder looks at a candidate."""

    index: int
    size_labels: tuple[str, ...]  # which of the problem's sizes to time
    warmup: int  # untimed runs before timing, per shape
    reps: int  # timed repetitions, per shape, at most
    input_sets: int = 3  # distinct input sets used in rotation
    interleave: bool = True  # time the reference in the same call, alternating
    profile: bool = False  # run Nsight Compute on one launch (cuda only)
    check_seeds: int = 3  # fresh random seeds for the correctness check
    # stop a shape's repetitions once its speedup's interval is within this share of it on
    # both sides (engine.timing.sequential); 0: every repetition
    precision: float = 0.0


@dataclass(frozen=True)
class EvalJob:
    """Evaluate one candidate at one rung."""

    candidate_id: str
    source: str
    rung: RungSpec
    seed: int  # drives input generation and, on sim, the synthetic timings
    check: bool = True  # run the correctness gate (always at the first evaluation)
    session_seed: int = 0  # picks the session's seed pools (engine.backends.local.seed_pools)
    # The candidate is the project's own code (the hint library's): its runner may serve other
    # such candidates. Code an LLM or a user wrote shares a runner only with its own evaluations.
    project_code: bool = False

    @property
    def sha256(self) -> str:
        return source_sha256(self.source)


@dataclass
class Stats:
    """Summary of timing samples in milliseconds."""

    median: float
    ci_low: float  # bootstrap 95% interval of the median
    ci_high: float
    cv: float  # coefficient of variation (std / mean)
    iqr: float


@dataclass
class ShapeTiming:
    size_label: str
    samples_ms: list[float]
    ref_samples_ms: list[float]
    stats: Stats
    ref_stats: Stats
    speedup: float  # reference median / candidate median
    speedup_ci: tuple[float, float]  # paired bootstrap 95% interval


@dataclass
class EvalResult:
    """What a backend says about one candidate at one rung."""

    passed: bool
    reason: str | None = None  # stable rejection code (see engine.gate.reasons)
    message: str = ""  # what went wrong and what to do, for people
    error: float | None = None  # worst normalized error seen by the correctness check
    tolerance: float | None = None
    timings: list[ShapeTiming] = field(default_factory=list)
    gpu_seconds: dict[str, float] = field(default_factory=dict)  # seconds by activity
    profile: dict | None = None  # diagnosis (engine.profiler), when the rung profiled
    census: dict | None = None  # the kernel census over every target size, when one ran
    meaningful: bool = True  # False on the cpu backend: timings mean nothing there
    precision: str = "fp32"  # what the kernel computed in (fp32, tf32, fp16, bf16)
    references: dict = field(default_factory=dict)  # {"banked": n, "computed": n} by the judge

    @property
    def machine_fault(self) -> bool:
        """Whether the machine failed before the candidate could be judged (MACHINE_FAULT)."""
        return self.reason == MACHINE_FAULT

    @property
    def not_the_candidates(self) -> bool:
        """Whether the result judged nothing for a fault of the machine's or the problem's."""
        return self.reason in (MACHINE_FAULT, REFERENCE_FAILED)

    def to_dict(self) -> dict:
        return asdict(self)
