"""One evaluation request, inside the worker: import, check on fresh seeds, time, re-check.

The engine sees progress as phase messages ("compile", "run", "time") and holds each phase to
its own hard deadline; a phase that never ends gets the worker killed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from engine.gate.correctness import (
    CandidateRejected,
    build_models,
    check_outputs,
    make_inputs,
    reference_precision,
)
from engine.gate.precision import infer_precision, join_precisions, policy_rejection
from engine.problems.loader import ProblemError, import_module_from
from engine.problems.trace import expand_equivalents
from engine.timing.bench import make_timer, time_pair
from engine.worker.failures import classify

# Rejections that a re-check after timing turns into stale_output: the output went bad.
OUTPUT_REASONS = frozenset(
    "wrong_output nan_output unwritten_output constant_output wrong_shape bad_output_type".split()
)


class Evaluation:
    """State of one request: the modules, the current phase, and what was measured so far."""

    def __init__(self, request: dict, send_phase, candidate_dir: str):
        self.request = request
        self.send_phase = send_phase
        self.device = request["device"]
        self.replaced = expand_equivalents(request["replaces"])
        self.tolerance_spec = request.get("tolerance")
        self.phase = "compile"
        self.launched = False
        self.errors: list[tuple[float, float]] = []
        self.precisions: list[str] = []
        self.precision_by_dtype: dict[str, str] = {}
        digest = hashlib.sha256(request["source"].encode()).hexdigest()[:16]
        self.candidate_file = os.path.join(candidate_dir, f"candidate_{digest}.py")

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.send_phase(phase)

    def next_run(self) -> None:
        """The first call of the candidate compiles its kernels: it runs under the compile
        deadline; later calls under the per-run deadline."""
        self.enter("run" if self.launched else "compile")
        self.launched = True

    def load(self):
        self.enter("compile")
        problem = import_module_from(Path(self.request["problem_path"]), "problem")
        Path(self.candidate_file).write_text(self.request["source"])
        try:
            candidate = import_module_from(Path(self.candidate_file), "candidate")
        except ProblemError as exc:
            message = f"importing the candidate failed: {exc}"
            raise CandidateRejected("compile_error", message) from exc
        return problem, candidate

    def precision(self, inputs: list) -> str:
        """The precision the candidate computes `inputs` in (read from its source once per input
        dtype); rejected when the policy forbids it."""
        floats = [x.dtype for x in inputs if torch.is_tensor(x) and x.is_floating_point()]
        name = str(floats[0]).removeprefix("torch.") if floats else "float32"
        if name not in self.precision_by_dtype:
            precision = infer_precision(self.request["source"], name)
            rejection = policy_rejection(self.request["precision_policy"], precision)
            if rejection:
                raise CandidateRejected(rejection.reason, rejection.message)
            self.precision_by_dtype[name] = precision
        return self.precision_by_dtype[name]

    def check(self, problem, candidate, size: dict) -> None:
        fingerprints = []
        for seed in self.request["check_seeds"]:
            self.next_run()
            model, model_new = build_models(problem, candidate, size["params"], seed, self.device)
            inputs = make_inputs(problem, size["params"], seed, self.device)
            precision = self.precision(inputs)
            result = check_outputs(
                model, model_new, inputs, self.replaced, self.tolerance_spec, precision,
                fingerprints,
            )  # fmt: skip
            fingerprints.append(result.fingerprint)
            self.errors.append((result.error, result.tolerance))
            self.precisions.append(precision)

    def time_and_recheck(self, problem, candidate, size: dict) -> dict:
        """Raw samples for one size, then the timed instance checked again on a fresh seed."""
        timing = self.request["timing"]
        self.next_run()
        seed = timing["seed"]
        model, model_new = build_models(problem, candidate, size["params"], seed, self.device)
        input_sets = [
            make_inputs(problem, size["params"], seed + k, self.device)
            for k in range(max(1, timing["input_sets"]))
        ]
        with torch.no_grad():
            model_new(*input_sets[0])  # compiles, under the compile deadline
        self.enter("time")
        cand, ref = time_pair(
            model_new, model, input_sets, timing["warmup"], timing["reps"], timing["interleave"],
            make_timer(self.device),
        )  # fmt: skip
        del input_sets
        self.enter("run")
        recheck_seed = timing["recheck_seed"]
        inputs = make_inputs(problem, size["params"], recheck_seed, self.device)
        precision = self.precision(inputs)
        try:
            result = check_outputs(
                model, model_new, inputs, self.replaced, self.tolerance_spec, precision
            )
        except CandidateRejected as exc:
            if exc.reason not in OUTPUT_REASONS:
                raise
            raise CandidateRejected(
                "stale_output",
                f"correct before timing, wrong after {timing['warmup'] + timing['reps']} timed "
                f"calls on a fresh input: {exc.message}; do not cache outputs or state between "
                "calls",
            ) from exc
        self.errors.append((result.error, result.tolerance))
        self.precisions.append(precision)
        return {"cand": cand, "ref": ref}

    def run(self) -> dict:
        reference_precision(self.request["precision_policy"])
        problem, candidate = self.load()
        sizes = self.request["sizes"]
        if self.request["check_seeds"]:
            for size in sizes:
                self.check(problem, candidate, size)
        samples = {}
        if self.request.get("timing"):
            for size in sizes:
                samples[size["label"]] = self.time_and_recheck(problem, candidate, size)
        return self.verdict(passed=True, samples=samples)

    def verdict(self, passed: bool, reason=None, message="", samples=None, fatal=False) -> dict:
        worst = max(self.errors, default=(None, None), key=lambda e: e[0] / max(e[1], 1e-300))
        return {
            "passed": passed,
            "reason": reason,
            "message": message,
            "error": worst[0],
            "tolerance": worst[1],
            "precision": join_precisions(self.precisions),
            "samples": samples or {},
            "fatal": fatal,
        }


def evaluate(request: dict, send_phase, candidate_dir: str) -> dict:
    """Run one request; every failure of the candidate becomes a rejection, never an exception."""
    job = Evaluation(request, send_phase, candidate_dir)
    try:
        verdict = job.run()
    except Exception as exc:
        reason, message, fatal = classify(exc, job.phase, job.candidate_file)
        verdict = job.verdict(passed=False, reason=reason, message=message, fatal=fatal)
    if job.device == "cuda":
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception as exc:  # a sticky CUDA error (illegal address...): the context is gone
            reason, message, _ = classify(exc, job.phase, job.candidate_file)
            verdict = job.verdict(passed=False, reason=reason, message=message, fatal=True)
    return verdict
