"""The `sim` backend: deterministic synthetic timings from the candidate's hash and the seed.

For testing and demonstrating the scheduler without a GPU: the same candidate, seed, rung and
size always give the same samples; nothing reads a clock, runs a subprocess or computes with
torch. The static gate is the real one. An evaluation lasts the GPU time it simulates (scaled by
KERNELBRAIN_SIM_PACE), so a demonstration unfolds at a GPU's pace: a default run on softmax
lasts minutes, time enough to pin and veto; the tests set the pace to 0 (at once).
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
import time

from engine import settings
from engine.gate.static import static_check
from engine.generate.composite import routed_members
from engine.jobs import EvalJob, EvalResult, ShapeTiming
from engine.problems import Problem
from engine.timing.sequential import stopped_at
from engine.timing.stats import speedup_interval, summarize

# Share of candidates that fail correctness, and the reasons they fail with.
FAIL_FRACTION = 0.08
FAIL_REASONS = ("wrong_output", "compile_error", "unwritten_output", "timeout")
# Fewer bootstrap resamples than real timing: the scheduler benchmark runs 10,000 candidates.
SIM_RESAMPLES = 100
# Synthetic device: a fixed launch overhead plus a copy-bandwidth-like cost per element.
LAUNCH_MS, MS_PER_ELEMENT = 0.005, 2e-9
# How much a kernel's speed varies between the target shapes (log-normal spread around its
# quality): shape specialists exist, as on a GPU, where the winners of small and large shapes
# differ.
SHAPE_SPREAD = 0.1
DISPATCH_MS = 0.001  # what a composite's Python dispatch adds to a call (about 1 us, measured)
PROFILE_SECONDS = 8.0
CENSUS_SECONDS = 5.0  # one ncu pass over every target size, names and durations only
# Wall seconds an evaluation lasts per GPU-second it simulates: 1, a GPU's pace, by default.
SIM_PACE_ENV = settings.SIM_PACE


def sim_pace() -> float:
    return settings.value(SIM_PACE_ENV)


def _unit(*parts) -> float:
    """A uniform number in [0, 1) determined by `parts`."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _normal(*parts) -> float:
    u1, u2 = _unit(*parts, "a"), _unit(*parts, "b")
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


def reference_ms(problem: Problem, label: str) -> float:
    params = problem.size(label).params
    elements = math.prod(v for v in params.values() if isinstance(v, int)) or 1
    return LAUNCH_MS + MS_PER_ELEMENT * elements


def _speed(sha: str, label: str) -> float:
    """A kernel's true speedup over the reference at one size: its quality, varied by shape."""
    return _quality(sha) * math.exp(SHAPE_SPREAD * _normal(sha, "size", label))


@functools.lru_cache(maxsize=4096)
def _quality(sha: str) -> float:
    """A kernel's true speedup over the reference, before its shapes vary it."""
    return math.exp(0.5 * _normal(sha, "quality"))


class SimBackend:
    name = "sim"
    profile_seconds = PROFILE_SECONDS
    timings_meaningful = True  # synthetic, but standing in for real measurements

    def __init__(self):
        self._gate_cache: dict[tuple[str, str], object] = {}
        self.pace = sim_pace()

    def _static(self, problem: Problem, job: EvalJob):
        key = (problem.name, job.sha256)
        if key not in self._gate_cache:
            self._gate_cache[key] = static_check(problem, job.source)
        return self._gate_cache[key]

    def evaluate(self, problem: Problem, job: EvalJob) -> EvalResult:
        result = self.simulate(problem, job)
        time.sleep(self.pace * sum(result.gpu_seconds.values()))
        return result

    def simulate(self, problem: Problem, job: EvalJob) -> EvalResult:
        """The evaluation's result, at once."""
        rejection = self._static(problem, job)
        if rejection:
            return EvalResult(False, rejection.reason, rejection.message)
        sha = job.sha256
        compile_s = 0.5 + 1.5 * _unit(sha, "compile")
        routed = routed_members(job.source)  # a composite runs its members' (passing) kernels
        if job.check and not routed and _unit(sha, "fails") < FAIL_FRACTION:
            reason = FAIL_REASONS[int(_unit(sha, "reason") * len(FAIL_REASONS))]
            return EvalResult(
                False, reason, f"simulated {reason} (sim backend, from the candidate's hash)",
                gpu_seconds={"compile": compile_s},
            )  # fmt: skip
        cv = 0.01 + 0.06 * _unit(sha, "noise")
        rng = random.Random(_unit(sha, job.seed, job.rung.index))
        timings, check_s, time_s = [], 0.0, 0.0
        for label in job.rung.size_labels:
            ref = reference_ms(problem, label)
            if routed:
                default, winners = routed
                cand = DISPATCH_MS + ref / _speed(winners.get(label, default), label)
            else:
                cand = ref / _speed(sha, label)
            cand_ms = [cand * math.exp(rng.gauss(0.0, cv)) for _ in range(job.rung.reps)]
            ref_ms = [ref * math.exp(rng.gauss(0.0, 0.02)) for _ in range(job.rung.reps)]
            taken = stopped_at(cand_ms, ref_ms, job.rung.precision, job.rung.input_sets)
            cand_ms, ref_ms = cand_ms[:taken], ref_ms[:taken]
            speedup, interval = speedup_interval(ref_ms, cand_ms, resamples=SIM_RESAMPLES)
            timings.append(ShapeTiming(
                label, cand_ms, ref_ms, summarize(cand_ms, SIM_RESAMPLES),
                summarize(ref_ms, SIM_RESAMPLES), speedup, interval,
            ))  # fmt: skip
            warm = job.rung.warmup * (cand + ref)
            time_s += (sum(cand_ms) + sum(ref_ms) + warm) / 1e3
            check_s += job.rung.check_seeds * 20 * (cand + ref) / 1e3 if job.check else 0.0
        gpu_seconds = {"compile": compile_s, "check": check_s, "time": time_s}
        profile = None
        if job.rung.profile:
            gpu_seconds["profile"] = PROFILE_SECONDS
            profile = {
                "status": "unavailable",
                "why": "sim backend: no GPU to profile (the cost of a profile is still charged, "
                "as on cuda)",
            }
        return EvalResult(
            True, error=1e-7 * _unit(sha, "error"), tolerance=1e-5, timings=timings,
            gpu_seconds=gpu_seconds, profile=profile, precision="fp32",
        )  # fmt: skip

    def prepare(self, problem: Problem, sources: list[str], labels) -> None:
        """Nothing compiles here."""

    def census(self, problem: Problem, source: str, labels, result: EvalResult) -> None:
        """No launch records to read; the census's cost is charged, as on cuda."""
        if result.passed:
            result.gpu_seconds["check"] = result.gpu_seconds.get("check", 0.0) + CENSUS_SECONDS
            result.census = {"status": "unavailable", "sizes": list(labels),
                             "why": "sim backend: no GPU launches to census"}  # fmt: skip

    def close(self) -> None:
        pass
