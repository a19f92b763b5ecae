"""The engine's side of the bench's timings, synthetic numbers on sim. PyTorch eager and
torch.compile (the problem's own, trusted code) are timed in one subprocess per problem (see
engine.bench.contenders); candidate kernels are timed by the judge, in sandboxed runners, against
the reference timed interleaved there, as in a search. Nothing here runs library or candidate
code."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field

from engine.backends.local import LocalBackend, gpu_turn
from engine.backends.sim import SimBackend, reference_ms
from engine.bench import BenchError
from engine.jobs import EvalJob, RungSpec
from engine.problems import Problem
from engine.worker.client import Timeouts
from engine.worker.sandbox import worker_environment

# Timing at each size: warm-up calls and repetitions per contender, input sets in rotation. The
# interpreter on cpu is slow and its timings mean nothing, so it does the least that runs.
TIMING = {
    "cuda": {"warmup": 5, "reps": 50, "input_sets": 2},
    "cpu": {"warmup": 1, "reps": 3, "input_sets": 1},
    "sim": {"warmup": 0, "reps": 50, "input_sets": 1},
}
# Deadline of one problem's timing process: starting torch, then per size a torch.compile (up to a
# minute or two for the largest) and the timing itself.
START_TIMEOUT_S, PER_SIZE_TIMEOUT_S = 120.0, 240.0
STDERR_TAIL_CHARS = 1500
# Ceilings the sim backend reports: the H200's, measured once (docs: DESIGN.md), not this run's.
SIM_CEILINGS = {
    "copy_bytes_per_s": 4.27e12, "fp32_flops_per_s": 51e12, "tf32_flops_per_s": 360e12,
    "fp16_flops_per_s": 661e12,
}  # fmt: skip
SIM_REFERENCE_NOISE = 0.02  # the sim backend's own noise on reference samples
JUDGED_SEED_OFFSET = 7  # the judge's inputs for the bench's candidates, apart from eager's


@dataclass
class SizeTimes:
    """Raw samples in ms per contender ("eager", "compile", candidate names) at one size, with
    why a contender has none; and for each candidate, the judge's samples of the reference timed
    interleaved with it (its speedup over eager comes from that pair)."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    compile_seconds: float | None = None
    judged_eager: dict[str, list[float]] = field(default_factory=dict)


def _run(request: dict, device: str, timeout_s: float, gpu: int = 0
         ) -> tuple[list[dict], str | None]:  # fmt: skip
    """The JSON lines a timing process on GPU `gpu` sent, and why it ended early (None when it
    finished)."""
    command = [sys.executable, "-m", "engine.bench.contenders"]
    env = worker_environment(device)
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    # It imports torch while it waits for the request; it has the GPU alone from then on (its
    # torch.compile too: Inductor benchmarks kernels on the GPU).
    try:
        with gpu_turn(device, gpu):
            return _communicate(proc, request, timeout_s)
    finally:
        if proc.poll() is None:  # interrupted before its request went
            os.killpg(proc.pid, signal.SIGKILL)


def _communicate(proc: subprocess.Popen, request: dict, timeout_s: float
                 ) -> tuple[list[dict], str | None]:  # fmt: skip
    try:
        out, err = proc.communicate(json.dumps(request), timeout=timeout_s)
        failure = None
        if proc.returncode != 0:
            failure = f"the timing process exited with status {proc.returncode}: " + (
                err[-STDERR_TAIL_CHARS:].strip() or "no output"
            )
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the compiler's helper processes too
        out, err = proc.communicate()
        failure = f"the timing process ran past its {timeout_s:g} s deadline and was killed"
    lines = []
    for line in out.splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut short by the kill
    return lines, failure


def measure_ceilings(backend: str, gpu: int = 0) -> dict:
    """{"ceilings": {...}, "device_name", "torch", "triton", "measured"} of GPU `gpu`; on sim,
    fixed numbers."""
    if backend == "sim":
        return {"ceilings": dict(SIM_CEILINGS), "device_name": "sim", "measured": False}
    request = {"kind": "ceilings", "device": backend}
    lines, failure = _run(request, backend, START_TIMEOUT_S * 2, gpu)
    if failure or not lines:
        raise BenchError(
            f"measuring the device's ceilings failed: {failure or 'no result'}; "
            "`kernelbrain doctor` says whether the device works"
        )
    return {**{k: v for k, v in lines[0].items() if k != "event"}, "measured": True}


def time_contenders(
    problem: Problem, labels: list[str], sources: dict[str, str], backend: str, seed: int,
    judge_timeout_s: float | None = None, gpu: int = 0,
) -> dict[str, SizeTimes]:  # fmt: skip
    """Samples per size label for eager and torch.compile, from one process that is killed past a
    deadline set by the number of sizes, and for each candidate source (by name), from the judge
    (each phase held to `judge_timeout_s` when given); all on GPU `gpu`."""
    if backend == "sim":
        return _sim_times(problem, labels, sources, seed)
    request = {
        "kind": "sizes",
        "device": backend,
        "problem_path": str(problem.path),
        "precision_policy": problem.precision_policy,
        "sizes": [{"label": s, "params": problem.size(s).params} for s in labels],
        "seed": seed,
        "compile": True,
        **TIMING[backend],
    }
    deadline = START_TIMEOUT_S + PER_SIZE_TIMEOUT_S * len(labels)
    lines, failure = _run(request, backend, deadline, gpu)
    times = {}
    for line in lines:
        times[line["label"]] = SizeTimes(line["samples"], line["errors"], line["compile_seconds"])
    for label in labels:
        if label not in times:
            why = failure or "the timing process sent nothing for this size"
            times[label] = SizeTimes(errors={k: why for k in ("eager", "compile")})
    _judge_candidates(problem, labels, sources, backend, seed, judge_timeout_s, times, gpu)
    return times


def _judge_candidates(problem, labels, sources, backend, seed, timeout_s, times, gpu) -> None:
    """Each candidate timed by the judge at every size (its output checked again after the
    timing, on a fresh input): its samples and the reference's, or why there are none."""
    if not sources:
        return
    timeouts = (
        Timeouts(compile_s=timeout_s, run_s=timeout_s, time_s=timeout_s) if timeout_s else None
    )
    judge = LocalBackend(backend, gpu=gpu, timeouts=timeouts)
    settings = TIMING[backend]
    timing = {"seed": seed + JUDGED_SEED_OFFSET, "recheck_seed": seed + JUDGED_SEED_OFFSET + 1,
              "interleave": True, **settings}  # fmt: skip
    sizes = [problem.size(label) for label in labels]
    try:
        for name, source in sources.items():
            result = judge.judge(problem, source, sizes, timing=timing)
            for label in labels:
                measured = next((t for t in result.timings if t.size_label == label), None)
                if measured is None:
                    times[label].errors[name] = f"the judge: {result.reason}: {result.message}"
                else:
                    times[label].samples[name] = measured.samples_ms
                    times[label].judged_eager[name] = measured.ref_samples_ms
    finally:
        judge.close()


def _sim_times(problem, labels, sources, seed) -> dict[str, SizeTimes]:
    """Eager from the sim backend's reference model, candidates from the sim backend itself;
    no torch.compile (there is no GPU and no compiler behind sim)."""
    reps = TIMING["sim"]["reps"]
    rung = RungSpec(0, tuple(labels), warmup=0, reps=reps, input_sets=1)
    sim = SimBackend()
    results = {
        name: sim.simulate(problem, EvalJob(name, source, rung, seed, check=False))
        for name, source in sources.items()
    }
    rng = random.Random(seed)
    times = {}
    for label in labels:
        ref = reference_ms(problem, label)
        t = SizeTimes(
            samples={
                "eager": [ref * math.exp(rng.gauss(0, SIM_REFERENCE_NOISE)) for _ in range(reps)]
            },  # fmt: skip
            errors={"compile": "sim backend: no torch.compile timing (no GPU, no compiler)"},
        )
        for name, result in results.items():
            timing = next((x for x in result.timings if x.size_label == label), None)
            if timing is None:
                t.errors[name] = f"sim backend: {result.reason}: {result.message}"
            else:
                t.samples[name] = timing.samples_ms
                t.judged_eager[name] = timing.ref_samples_ms
        times[label] = t
    return times
