"""Timing as the judge sees it. The runner times each candidate call in its own process (CUDA
events, and the host clock up to a device-wide synchronize, so work left on any stream counts);
the judge times the reference in its own process the same way, interleaved, and checks the
runner's figures against its own clock, which no candidate can touch:

- before any candidate code exists in the runner, the judge measures what a repetition and a
  fetch cost around a call of nothing (the honest overhead);
- after randomly chosen repetitions the judge asks for the output at random positions (chosen
  after the call) and checks them against its reference: a call that skipped its work, or a
  memoised output, fails; the fetch's time counts as the call's, so work deferred to it shows;
- the warm-up's inputs are never timed, and between rotations of the input sets every float input
  gets new contents at a new address (engine.runner.fresh_inputs), in the runner and the judge
  alike: no timed call's inputs repeat an earlier call's, so no kept output answers one;
- a few timed calls get their inputs' new contents inside the timed bracket, where no output can
  be ready for them: timed calls much cheaper than those were answered from outputs computed
  outside them (while the runner held the inputs, untimed), which is `timing_tampered`;
- the judge's clock must account for the runner's figures: time it saw beyond them and beyond
  the calibrated overhead, more than noise allows, is `timing_tampered`.
"""

from __future__ import annotations

import math
import random
import statistics

import torch

from engine.gate.correctness import (
    CandidateRejected,
    as_list,
    normalized_error,
    reference_float64,
)
from engine.gate.precision import gate_tolerance
from engine.runner.fresh_inputs import InputRotation
from engine.runner.positions import fetch_positions
from engine.runner.timer import Bracket, collector_paused, noop
from engine.timing.sequential import settled
from engine.worker.failures import classify_reply
from engine.worker.protocol import TimingPlan

CALIBRATION_REPS = 8
# A verified repetition's error may exceed the check's tolerance this much (fewer elements).
SAMPLE_TOLERANCE_FACTOR = 4.0
# What the judge's clock may see beyond the runner's figures and the calibrated overhead: a share
# of the figures, plus per call and in all an allowance for scheduling noise (the cpu backend's
# runners share two cores with a runner starting beside them: its noise is larger).
TAMPER_SHARE = 0.25
NOISE_MS = {
    "cuda": {"per_call": 0.2, "fixed": 20.0, "fetch": 1.0},
    "cpu": {"per_call": 5.0, "fixed": 200.0, "fetch": 100.0},
}
EVENT_AFTER_HOST_MS = 0.05  # CUDA events lie inside the host bracket, up to clock skew
# One verified fetch of a timed size may exceed the allowance for each this many verified: a
# hiccup of a loaded host (2-7 ms, seen on the H200 under bench --jobs) moves no median, and a
# candidate deferring the work of half its calls, enough to move the median, is caught unless at
# most one of 8 verified calls is among them (3.5%; 0.3% of 12, a bench's final timing). Below 8
# verified fetches no slow one passes: one of 4 would let it escape 31% of the time. A slow fetch
# beyond these has the size timed once more with every call verified, and only that timing's
# samples count: a call that defers its work there is caught for certain, and one that does not
# is timed honestly.
VERIFIED_PER_SLOW_FETCH = 8
# Timed calls per size whose inputs change inside the bracket (each verified), and the share of
# the cheapest one's work (its time less the judge's own time for the change) below which the
# median timed call cannot be honest: a call cannot cost less than half of the same call. On cpu
# a quarter: its runners share two cores with the judge and other work, and both probes of an
# honest softmax took 2.4 times its median (108 against 44.9 ms) in a loaded test run; an output
# answered from memory costs a millisecond against tens.
WORK_PROBES = 2
WORK_SHARE = {"cuda": 0.5, "cpu": 0.25}


class SlowFetch(CandidateRejected):
    """A verified fetch took longer than a no-op's beyond the allowance and the hiccups
    tolerated."""


def _number(reply: dict, key: str) -> float:
    value = reply.get(key)
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise CandidateRejected("timing_tampered", f"the runner reported {key}={value!r}")
    return float(value)


class JudgeClock:
    """The judge's side of timing one size: calibration, repetitions, verification."""

    def __init__(self, job, model, input_sets: list, timing: TimingPlan, calibration: tuple):
        self.job = job
        self.calibration = calibration
        self.noise = NOISE_MS["cuda" if job.device == "cuda" else "cpu"]
        self.runner = job.runner
        self.model = model
        self.input_sets = input_sets
        self.rotation = InputRotation(input_sets)
        self.timing = timing
        self.rng = random.Random(timing.seed * 7919 + 17)
        self.bracket = Bracket(job.device)
        self.sample_tolerance: float | None = None  # set by the first verification

    def request(self, message: dict, what: str) -> tuple[dict, float]:
        """One runner command timed by the judge's clock, with none of the judge's own GPU work
        still running (it would share the GPU with the runner's and show as the runner's)."""
        if self.job.device == "cuda":
            torch.cuda.synchronize()
        message = self.job.outgoing(message)  # shared memory travels before the clock starts
        reply, wall = self.runner.timed_request(message, self.job.deadlines["time"], what)
        rejected = classify_reply(reply, "time")
        if rejected:
            raise CandidateRejected(*rejected)
        return reply, wall

    def fetch_message(self, numel: int) -> dict:
        return fetch_message(self.job.tag(), numel, self.rng)

    def verify(self, set_index: int, expected: list | None = None) -> float:
        """Fetch the last call's outputs at random positions and check them; the fetch's wall.
        `expected` is PyTorch's output of the same inputs, where the judge has it from the paired
        reference call (else it is computed here). The first check of a size, after the warm-up,
        compares with the float64 reference and sets the size's tolerance; later ones compare
        with `expected` within that tolerance plus PyTorch's own error (one more tolerance), and
        only an output beyond it is compared with the float64 reference, which decides."""
        if expected is None:
            with torch.no_grad():
                expected = as_list(self.model(*self.input_sets[set_index]))
        message = self.fetch_message(expected[0].numel())
        reply, wall = self.request(message, "fetching a timed output")
        index = fetch_positions(message["seed"], message["numel"])
        shapes = [e.reshape(-1)[index.to(e.device)] for e in expected]
        del expected
        outputs = self.job.read_outputs(reply, shapes)
        if self.sample_tolerance is not None:
            error = max(normalized_error(o, e.double()) for o, e in zip(outputs, shapes,
                                                                        strict=True))  # fmt: skip
            if error <= (SAMPLE_TOLERANCE_FACTOR + 1) * self.sample_tolerance:
                return wall
        # The reference of the set's contents now, computed here and kept only at the positions
        # fetched (a full-size float64 reference is large; the judge holds GPU memory briefly).
        ref64 = reference_float64(self.model, self.input_sets[set_index])
        picked = [r.reshape(-1)[index.to(r.device)] for r in ref64]
        del ref64
        if self.sample_tolerance is None:
            self.sample_tolerance = self.tolerance(shapes, picked, set_index)
        error = max(normalized_error(o, r) for o, r in zip(outputs, picked, strict=True))
        if not error <= SAMPLE_TOLERANCE_FACTOR * self.sample_tolerance:
            raise CandidateRejected(
                "stale_output",
                f"a timed call's output is wrong (normalized error {error:.3g} at random "
                "positions): compute every call's output from its inputs; never cache outputs "
                "or skip work between calls",
            )
        return wall

    def tolerance(self, expected: list, picked: list, set_index: int) -> float:
        """The gate's tolerance for this candidate, with PyTorch's own error at the fetched
        positions (an evaluation that checked no full output, as a later rung's, has no other),
        or the tolerance of a full output this evaluation checked, where larger."""
        torch_error = max(normalized_error(e, r) for e, r in zip(expected, picked, strict=True))
        dtype = str(expected[0].dtype).removeprefix("torch.")
        precision = self.job.precision(self.input_sets[set_index])
        request = self.job.request
        here = gate_tolerance(
            request.tolerance, self.job.policy, dtype, precision, torch_error, request.operators
        )
        return max([here] + [tolerance for _, tolerance in self.job.errors])

    def run(self) -> dict:
        encoded = [self.job.encode(s) for s in self.input_sets]
        self.request(
            {"op": "time_begin", "sets": encoded, "warmup": self.timing.warmup}, "warming up"
        )
        warmup = self.timing.warmup
        with torch.no_grad():
            for r in range(warmup):
                self.model(*self.input_sets[r % len(self.input_sets)])
        if warmup:
            # Untimed, and checked like the others: what a first fetch of this output costs
            # once (the gather kernel for its size loaded lazily, the allocator growing) is paid
            # here, not charged to a timed call.
            self.verify((warmup - 1) % len(self.input_sets))
        self.job.enter("time")
        with collector_paused():
            try:
                return self.repetitions()
            except SlowFetch:  # a hiccup, or work deferred: again, every call verified
                return self.repetitions(verify_all=True)

    def repetitions(self, verify_all: bool = False) -> dict:
        judge_sync = judge_sync_overhead(self.bracket)
        reps, sets = self.timing.reps, len(self.input_sets)
        verified = set(self.rng.sample(range(reps), min(reps, max(2, reps // 4))))
        if verify_all:
            verified = set(range(reps))
        self.slow_fetches, self.slow_fetches_tolerated = 0, len(verified) // VERIFIED_PER_SLOW_FETCH
        self.claimed, self.seen = 0.0, 0.0
        cand, ref = [], []
        self.shift()  # the warm-up's inputs are never timed
        for r in range(reps):
            k, expected = r % sets, None
            for who in ("cand", "ref") if r % 2 == 0 else ("ref", "cand"):
                if who == "ref":
                    with torch.no_grad():
                        event, host, out = self.bracket.rep(self.model, self.input_sets[k])
                    ref.append(max(event, host - judge_sync))
                    expected = as_list(out) if r in verified else None  # the fetch's check
                    del out
                    continue
                sample, claimed = self.timed_call({"op": "rep", "set": k})
                cand.append(sample)
            if r in verified:  # after the paired reference call: its output checks the fetch
                self.verify_timed(k, claimed, expected)
            del expected
            if k == sets - 1 and r < reps - 1:
                if self.settled(cand, ref, verified, r + 1):
                    break
                self.shift()
        self.check_work(cand, judge_sync)
        self.check_accounting(self.claimed, self.seen, len(cand) + WORK_PROBES)
        return {"cand": cand, "ref": ref}

    def settled(self, cand: list, ref: list, verified: set, done: int) -> bool:
        """Whether the size's timing may stop after `done` repetitions, at the end of a rotation
        of the input sets: its speedup is pinned down (engine.timing.sequential), at least two of
        its calls were verified, and none of their fetches was slow beyond what that many
        verified ones tolerate."""
        checked = sum(1 for r in verified if r < done)
        return (checked >= 2 and self.slow_fetches <= checked // VERIFIED_PER_SLOW_FETCH
                and settled(cand, ref, self.timing.precision))  # fmt: skip

    def timed_call(self, message: dict) -> tuple[float, float]:
        """One timed call in the runner, counted by the accounting: (its sample, its host
        figure)."""
        runner_overhead, _, runner_sync = self.calibration
        reply, wall = self.request(message, "one timed call")
        event, host = _number(reply, "event_ms"), _number(reply, "host_ms")
        if event > host + EVENT_AFTER_HOST_MS:
            raise CandidateRejected(
                "timing_tampered",
                f"the runner's event time {event:.4g} ms exceeds its own host bracket "
                f"{host:.4g} ms",
            )
        self.claimed += host
        self.seen += wall - runner_overhead
        return max(event, host - runner_sync), host

    def verify_timed(self, set_index: int, host: float, expected: list | None = None) -> None:
        """Check the last timed call's output; its fetch's time counts as the call's."""
        _, fetch_overhead, _ = self.calibration
        fetched = self.verify(set_index, expected) - fetch_overhead
        self.seen += self.check_fetch(fetched, host)

    def shift(self) -> None:
        """New contents at new addresses for every input set, in the runner and the judge."""
        shift = self.rng.randrange(1, 1 << 30)
        self.request({"op": "shift", "shift": shift}, "changing the inputs")
        self.rotation.shift(shift)

    def check_work(self, cand: list[float], judge_sync: float) -> None:
        """Timed calls whose inputs get new contents inside the bracket, where no output can be
        ready for them, each less the judge's own time for the change: the median timed call
        costing less than a share of the cheapest of them was answered from outputs computed
        outside the timed calls."""
        work = []
        for i in range(WORK_PROBES):
            k, fresh = i % len(self.input_sets), self.rng.randrange(1, 1 << 30)
            sample, host = self.timed_call({"op": "rep", "set": k, "fresh": fresh})
            _, change, _ = self.bracket.rep(self.rotation.shift_set, (k, fresh))
            self.verify_timed(k, host)
            work.append(sample - max(0.0, change - judge_sync))
        share = WORK_SHARE["cuda" if self.job.device == "cuda" else "cpu"]
        floor = share * min(work) - self.noise["per_call"]
        median = statistics.median(cand)
        if median < floor:
            raise CandidateRejected(
                "timing_tampered",
                f"the timed calls took {median:.3g} ms (median), a call on inputs it first saw "
                f"inside the timed call {min(work):.3g} ms: outputs were computed outside the "
                "timed calls or kept from earlier ones; compute each call's output inside it",
            )

    def check_fetch(self, fetched: float, host: float) -> float:
        """A fetch costs what a no-op's fetch costs: more, beyond the hiccups tolerated, means
        the calls' work was deferred. The fetch's time the accounting counts (none for a
        hiccup)."""
        if fetched <= self.noise["fetch"] + TAMPER_SHARE * host:
            return fetched
        self.slow_fetches += 1
        if self.slow_fetches > self.slow_fetches_tolerated:
            raise SlowFetch(
                "timing_tampered",
                f"handing over a timed call's output took {fetched:.3g} ms more than a no-op's; "
                f"the call itself claimed {host:.3g} ms. Work must be done inside the timed call",
            )
        return 0.0

    def check_accounting(self, claimed: float, seen: float, reps: int) -> None:
        allowance = TAMPER_SHARE * claimed + self.noise["per_call"] * reps + self.noise["fixed"]
        if seen - claimed > allowance:
            raise CandidateRejected(
                "timing_tampered",
                f"the judge's clock saw {seen:.3g} ms in {reps} timed calls beyond the calibrated "
                f"overhead; the runner's figures account for {claimed:.3g} ms. Work outside the "
                "timed call (deferred, on another thread, or figures patched) is not allowed",
            )


def fetch_message(tag: str, numel: int, rng: random.Random) -> dict:
    """Ask for the output at the positions a fresh seed draws (engine.runner.positions)."""
    return {"op": "fetch", "tag": tag, "seed": rng.randrange(1 << 62), "numel": numel}


def calibrate(runner, deadline_s: float) -> tuple[float, float, float]:
    """(repetition overhead, fetch overhead, the runner's sync overhead) in ms, measured by the
    judge's clock around calls of nothing, before any candidate code exists in the runner."""
    rng = random.Random(0)
    overheads, fetches, syncs = [], [], []
    for _ in range(CALIBRATION_REPS):
        reply, wall = runner.timed_request({"op": "noop"}, deadline_s, "calibrating")
        host, event = _number(reply, "host_ms"), _number(reply, "event_ms")
        overheads.append(wall - host)
        syncs.append(host - event)
        _, fetch_wall = runner.timed_request(
            fetch_message("cal", 1 << 16, rng), deadline_s, "calibrating"
        )
        fetches.append(fetch_wall)
    return statistics.median(overheads), statistics.median(fetches), statistics.median(syncs)


_JUDGE_SYNC: dict[str, float] = {}


def judge_sync_overhead(bracket: Bracket) -> float:
    """What a bracket adds around a call of nothing in the judge (once per process)."""
    if bracket.device not in _JUDGE_SYNC:
        reps = [bracket.rep(noop, ()) for _ in range(CALIBRATION_REPS)]
        _JUDGE_SYNC[bracket.device] = statistics.median(h - e for e, h, _ in reps)
    return _JUDGE_SYNC[bracket.device]


def time_size(job, model, input_sets: list, timing: TimingPlan, calibration: tuple) -> dict:
    """Raw samples in ms of the candidate (in its runner) and the reference (here)."""
    return JudgeClock(job, model, input_sets, timing, calibration).run()
