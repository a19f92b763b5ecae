"""The real backends: `cuda` (timings on a GPU) and `cpu` (the Triton interpreter: real execution
and correctness, timings that mean nothing and say so). Candidates run only in workers."""

from __future__ import annotations

import hashlib
import math
import os
import random
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import replace

from engine.backends import faults
from engine.backends.compile_pool import CompilePool, gpu_target, workers_wanted
from engine.gate.correctness import CandidateRejected
from engine.gate.kernel_census import check_kernel_census, own_kernels_unseen
from engine.gate.static import static_check
from engine.jobs import EvalJob, EvalResult, ShapeTiming, source_sha256
from engine.problems import Problem, Size
from engine.timing.stats import speedup_interval, summarize
from engine.worker.client import Timeouts, WorkerClient
from engine.worker.protocol import FRESH, SHARED, JudgeRequest, SizeSpec, TimingPlan, Verdict

# One lock per GPU, shared by this process's backends: evaluations, profiles and the bench's
# timings on one device never overlap. An evaluation takes it once its runner has started, a
# profile once ncu and its program have: their start overlaps other work on the GPU. The engine's
# loop evaluates one candidate at a time, so only callers running several searches in threads
# (`bench --jobs`) ever wait on it.
_GPU_LOCKS: dict[int, threading.Lock] = defaultdict(threading.Lock)
# Seeds of the `check` command's inputs, and the offset of an evaluation's timing inputs.
CHECK_SEED_STRIDE, TIMING_SEED_OFFSET = 7919, 104729
# A session's pools: the check seeds each candidate draws a few of, and the re-check seeds (never
# timing inputs) each timing draws one of; the judge banks their references
# (engine.worker.reference_bank).
CHECK_POOL, RECHECK_POOL = 8, 4
AUTO = "auto"  # LocalBackend's compile target: this GPU's on cuda


def gpu_turn(device: str, gpu: int) -> threading.Lock:
    """The lock whose holder alone works on GPU `gpu` (on cpu, one lock for the host)."""
    return _GPU_LOCKS[gpu if device == "cuda" else -1]


def runner_owner(job: EvalJob) -> str:
    """Whose runner evaluates `job` (engine.worker.runner_pool): the project's code shares one,
    other code gets its own."""
    return SHARED if job.project_code else job.sha256


def check_seeds(seed: int, count: int) -> list[int]:
    return [seed * CHECK_SEED_STRIDE + i for i in range(count)]


def seed_pools(session_seed: int) -> tuple[int, list[int], list[int]]:
    """(weights seed, check seeds, re-check seeds) of a session, apart from any timing seed."""
    base = int(hashlib.sha256(f"kernelbrain pools {session_seed}".encode()).hexdigest()[:12], 16)
    checks = [base + 1 + i for i in range(CHECK_POOL)]
    return base, checks, [base + 1 + CHECK_POOL + i for i in range(RECHECK_POOL)]


def job_seeds(job: EvalJob) -> tuple[int, list[int], int]:
    """(weights seed, check seeds, re-check seed) of one evaluation, drawn from its session's
    pools by the evaluation's own seed: candidates see varied subsets of the same input sets."""
    model_seed, checks, rechecks = seed_pools(job.session_seed)
    draw = random.Random(job.seed)
    seeds = draw.sample(checks, min(job.rung.check_seeds, CHECK_POOL)) if job.check else []
    return model_seed, seeds, draw.choice(rechecks)


class LocalBackend:
    """Gate and time candidates in worker subprocesses on this machine."""

    def __init__(
        self, device: str = "cuda", gpu: int = 0, timeouts: Timeouts | None = None,
        profile_timeout_s: float = 300.0, compile_target: str | None = AUTO,
        compile_workers: int | None = None, backoff: faults.Backoff | None = None,
    ):  # fmt: skip
        """`compile_target`: the GPU target ("cuda:90:32") that candidates are compiled for
        ahead of their first evaluation, by `compile_workers` compile workers beside the GPU
        (default: KERNELBRAIN_COMPILE_WORKERS, else compile_pool.DEFAULT_WORKERS). AUTO: this
        GPU's on cuda, none on cpu (the interpreter compiles nothing; a target given there still
        rejects kernels that would not compile for it). None: no compiling ahead. `backoff`:
        how machine faults are asked again (default: faults.Backoff.from_environment())."""
        if device not in ("cuda", "cpu"):
            raise ValueError(f"LocalBackend runs on 'cuda' or 'cpu', not {device!r}")
        if compile_workers is None:
            compile_workers = workers_wanted()
        self.name = device
        self.device = device
        self.gpu = gpu
        self.timings_meaningful = device == "cuda"
        # ncu on the H200: about 15 s a profile (a process, a context, one replayed launch).
        self.profile_seconds = 15.0 if device == "cuda" else 0.0
        self.profile_timeout_s = profile_timeout_s
        timeouts = timeouts or Timeouts()
        self.backoff = backoff or faults.Backoff.from_environment()
        # Each candidate's compiled kernels, kept between its evaluations (never shared).
        self.triton_caches = tempfile.mkdtemp(prefix="kb-triton-caches-")
        self.owns_caches = True
        # The judge of this device: one request an evaluation (check, timing and re-check in one
        # runner, so a candidate loads and compiles once an evaluation).
        self.judge_client = WorkerClient(device, gpu if device == "cuda" else None, timeouts)
        if compile_target == AUTO:
            compile_target = gpu_target(gpu) if device == "cuda" else None
        self.compile_pool = None
        if compile_target and compile_workers > 0:
            self.compile_pool = CompilePool(compile_target, compile_workers, timeouts)
        self.judge_client.start_soon()  # its imports overlap the engine's set-up and compiles

    def share_compiling(self, first: LocalBackend) -> None:
        """Use `first`'s compile workers and candidates' caches (another device of one search:
        a candidate compiles once, wherever it is evaluated)."""
        shutil.rmtree(self.triton_caches, ignore_errors=True)
        self.triton_caches, self.owns_caches = first.triton_caches, False
        self.compile_pool = first.compile_pool

    @property
    def isolation(self) -> dict:
        return self.judge_client.isolation

    def sizes_for(self, problem: Problem, labels) -> list[Size]:
        """The rung's sizes; on cpu the problem's tiny ones stand in for larger sizes."""
        sizes = [problem.size(label) for label in labels]
        if self.device == "cpu" and any(s.tier != "tiny" for s in sizes):
            return problem.tier("tiny") or [problem.smallest]
        return sizes

    def judge_request(self, problem: Problem, source: str, sizes: list[Size], *,
                      check_seeds=(), check_sizes=(), timing: TimingPlan | dict | None = None,
                      **fields) -> JudgeRequest:  # fmt: skip
        """What the judge process receives: everything it needs but the candidate's verdict
        (`timing` may be given as TimingPlan's fields; `fields`: JudgeRequest's others)."""
        if isinstance(timing, dict):
            timing = TimingPlan(**timing)
        return JudgeRequest(**{
            "problem_path": str(problem.path),
            "source": source,
            "device": self.device,
            "sizes": tuple(SizeSpec(s.label, s.params) for s in sizes),
            "replaces": tuple(problem.replaces),
            "tolerance": problem.tolerance,
            "operators": problem.operators,
            "precision_policy": problem.precision_policy,
            "allowed_torch_ops": tuple(problem.allowed_torch_ops),
            "draws_random": problem.draws_random,
            "check_seeds": tuple(check_seeds),
            "check_sizes": tuple(check_sizes),
            "timing": timing,
            "triton_cache": self._triton_cache(source),
            **fields,
        })  # fmt: skip

    def judge(self, problem: Problem, source: str, sizes: list[Size], **extra) -> EvalResult:
        """The judge's verdict on a request, without the engine's static rules; its kernels
        compiled ahead first, as an evaluation's are (the bench's timing of a search's best
        kernel starts with a cold cache)."""
        request = self.judge_request(problem, source, sizes, **extra)
        return self._compiled_and_judged(problem, source, sizes, request)

    def check(self, problem: Problem, source: str, sizes: list[Size] | None = None,
              seeds: list[int] | None = None) -> EvalResult:  # fmt: skip
        """The gate alone: static rules, then the correctness check in the judge."""
        rejected = self._static_rejection(problem, source)
        if rejected:
            return rejected
        sizes = sizes or self.sizes_for(problem, [problem.smallest.label])
        request = self.judge_request(problem, source, sizes, check_seeds=seeds or check_seeds(0, 3),
                                     runner=source_sha256(source))  # fmt: skip
        return self.backoff.retried(lambda: self._result(self.judge_client.run(request)))

    def prepare(self, problem: Problem, sources: list[str], labels) -> None:
        """Have `sources` (the next candidates to be evaluated, in order) compiled ahead, at
        the sizes `labels`, while the GPU works on others."""
        if not self.compile_pool:
            return
        sizes = self.sizes_for(problem, labels)
        for source in sources:
            key = source_sha256(source)
            if not self.compile_pool.submitted(key) and not static_check(problem, source):
                self.compile_pool.submit(key, self._compile_request(problem, source, sizes))

    def compiled_ahead(self, problem: Problem, source: str, sizes: list[Size]) -> dict:
        """The outcome of compiling `source` ahead (engine.worker.precompile.outcome, with its
        worker's `gpu_seconds`), once it is done; compiled now where `prepare` did not."""
        request = self._compile_request(problem, source, sizes)
        return self.compile_pool.result(source_sha256(source), request)

    def _compile_request(self, problem: Problem, source: str, sizes: list[Size]) -> JudgeRequest:
        model_seed = seed_pools(0)[0]  # the weights' values do not matter to a compiler
        return self.judge_request(problem, source, sizes, device="compile", model_seed=model_seed)

    def _wait_for_compile(self, problem: Problem, source: str, sizes: list[Size]
                          ) -> tuple[EvalResult | None, dict]:  # fmt: skip
        """(the rejection of a compile error or None, the seconds to charge) of the
        candidate's compile in a worker: its own seconds and those the GPU waited for it."""
        start = time.monotonic()
        found = self.compiled_ahead(problem, source, sizes)
        charges = {"precompile": found["gpu_seconds"].get("compile", 0.0),
                   "compile": time.monotonic() - start}  # fmt: skip
        if found.get("status") != "rejected":
            return None, charges
        rejected = EvalResult(False, found["reason"], found["message"],
                              meaningful=self.timings_meaningful, gpu_seconds=charges)  # fmt: skip
        return rejected, charges

    def evaluate(self, problem: Problem, job: EvalJob, sizes: list[Size] | None = None
                 ) -> EvalResult:  # fmt: skip
        """Gate (when job.check) and time; `sizes` overrides the rung's (the check command)."""
        sizes = sizes or self.sizes_for(problem, job.rung.size_labels)
        model_seed, seeds, recheck_seed = job_seeds(job)
        timing = TimingPlan(
            seed=job.seed + TIMING_SEED_OFFSET,
            recheck_seed=recheck_seed,
            warmup=job.rung.warmup,
            reps=job.rung.reps,
            input_sets=job.rung.input_sets,
            interleave=job.rung.interleave,
            precision=job.rung.precision,
        )
        rejected = job.check and self._static_rejection(problem, job.source)
        if rejected:  # checked once, at the first evaluation: the source never changes
            return rejected
        # The check's seeds run at the smallest size, where they are cheap; every timed size is
        # checked again after its timing, on a fresh seed (the re-check).
        smallest = min(sizes, key=lambda s: math.prod(v for v in s.params.values()
                                                      if isinstance(v, int)))  # fmt: skip
        request = self.judge_request(problem, job.source, sizes, check_seeds=seeds,
                                     check_sizes=[smallest.label], model_seed=model_seed,
                                     timing=timing, runner=runner_owner(job))  # fmt: skip
        # compiled ahead at its first evaluation; its cache keeps the kernels for the later ones
        result = self._compiled_and_judged(problem, job.source, sizes, request, job.check)
        if result.passed and job.rung.profile:
            result.profile = self._profile(problem, job.source, sizes[-1].label, result)
            _reject_foreign_kernels(result.profile, job.source, problem, result)
        return result

    def _compiled_and_judged(
        self, problem: Problem, source: str, sizes: list[Size], request: JudgeRequest,
        compile_first: bool = True,
    ) -> EvalResult:  # fmt: skip
        """The judge's verdict on `request`, `source`'s kernels compiled in the compile box first
        (where this backend compiles ahead and `compile_first`), so that the GPU's turn never
        waits for them; the compile's seconds are charged with the judge's."""
        charges = {}
        if compile_first and self.compile_pool:
            rejected, charges = self._wait_for_compile(problem, source, sizes)
            if rejected:
                return rejected
        result = self._judged(request)
        result.gpu_seconds = _add(result.gpu_seconds, charges)
        return result

    def _judged(self, request: JudgeRequest) -> EvalResult:
        """The judge's verdict on `request`, its faults given their owner (engine.backends.
        faults: a machine fault asked again with backoff, a crash run again in a fresh runner
        and held against a known-good request); every try's seconds are charged."""
        spent: dict[str, float] = {}

        def ask(asked: dict) -> EvalResult:
            nonlocal spent
            result = self._result(self.judge_client.run(asked, turn=self._gpu_lock()))
            spent = _add(spent, result.gpu_seconds)
            return result

        known_good = replace(
            request,
            source=faults.KNOWN_GOOD_SOURCE,
            check_seeds=(),
            timing=None,
            runner=FRESH,
            triton_cache=self._triton_cache(faults.KNOWN_GOOD_SOURCE),
        )
        result = faults.judged(lambda: ask(request), lambda: ask(known_good), self.backoff)
        result.gpu_seconds = spent
        return result

    def census(self, problem: Problem, source: str, labels, result: EvalResult) -> None:
        """The kernel census of one forward call at each size in `labels` (cuda only): rejects a
        passed `result` whose calls launched kernels that are not the candidate's. Its ncu run
        counts as check time (the census is part of the gate)."""
        if self.device != "cuda" or not result.passed:
            return
        from engine.profiler import census

        found = census(problem, source, list(labels), timeout_s=self.profile_timeout_s,
                       turn=self._gpu_lock(), triton_cache=self._triton_cache(source))  # fmt: skip
        result.gpu_seconds = _add(result.gpu_seconds, {"check": found.get("gpu_seconds", 0.0)})
        result.census = {"status": found["status"], "sizes": list(labels),
                         "why": found.get("why", "")}  # fmt: skip
        if not _reject_foreign_kernels(found, source, problem, result):
            result.census["status"] = "rejected"
        elif own_kernels_unseen(found, source, problem.allowed_torch_ops):
            result.census.update(status="unseen", why="the profiler listed none of the "
                                 "candidate's Triton kernels in the call: nothing is vouched for")

    def _static_rejection(self, problem: Problem, source: str) -> EvalResult | None:
        """The gate's static rules, in the engine: no worker is needed to reject these."""
        rejection = static_check(problem, source)
        if rejection is None:
            return None
        return EvalResult(False, rejection.reason, rejection.message,
                          meaningful=self.timings_meaningful)  # fmt: skip

    def _triton_cache(self, source: str) -> str:
        """Where the kernels of `source` are kept between its runners (and its profiles)."""
        return os.path.join(self.triton_caches, source_sha256(source)[:32])

    def _gpu_lock(self) -> threading.Lock:
        return gpu_turn(self.device, self.gpu)

    def _profile(self, problem: Problem, source: str, label: str, result: EvalResult) -> dict:
        if self.device != "cuda":
            return {"status": "unavailable", "why": "cpu backend has no GPU"}
        try:
            from engine.profiler import profile
        except ImportError as exc:
            return {"status": "unavailable", "why": f"engine.profiler cannot be imported: {exc}"}
        diagnosis = profile(
            problem,
            source,
            label,
            timeout_s=self.profile_timeout_s,
            turn=self._gpu_lock(),
            triton_cache=self._triton_cache(source),
        )
        seconds = diagnosis.get("gpu_seconds", 0.0)
        result.gpu_seconds = _add(result.gpu_seconds, {"profile": seconds})
        return diagnosis

    def _result(self, wire: dict) -> EvalResult:
        verdict = Verdict.from_wire(wire)
        timings = [_shape_timing(label, s["cand"], s["ref"])
                   for label, s in verdict.samples.items()]  # fmt: skip
        return EvalResult(
            passed=verdict.passed,
            reason=verdict.reason,
            message=verdict.message,
            error=verdict.error,
            tolerance=verdict.tolerance,
            timings=timings,
            gpu_seconds=verdict.gpu_seconds,
            meaningful=self.timings_meaningful,
            precision=verdict.precision,
            references=verdict.references,
        )

    def close(self) -> None:
        if self.owns_caches:
            if self.compile_pool:
                self.compile_pool.close()
            shutil.rmtree(self.triton_caches, ignore_errors=True)
        self.judge_client.close()


def _reject_foreign_kernels(found: dict, source: str, problem: Problem, result: EvalResult) -> bool:
    """Apply a profile's or census's kernel list to `result`; False when it rejected it."""
    try:
        check_kernel_census(found, source, problem.allowed_torch_ops, problem.draws_random)
    except CandidateRejected as exc:
        result.passed, result.reason, result.message = False, exc.reason, exc.message
        return False
    return True


def _shape_timing(label: str, cand: list[float], ref: list[float]) -> ShapeTiming:
    speedup, interval = speedup_interval(ref, cand)
    return ShapeTiming(label, cand, ref, summarize(cand), summarize(ref), speedup, interval)


def _add(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out
