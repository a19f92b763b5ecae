"""One evaluation request, in the judge: the judge owns the inputs, the references, the
comparisons, the timing cross-checks and the verdict; the candidate runs only in a runner (a
sandboxed process, fresh or lent again by engine.worker.runner_pool) that receives inputs and
returns output bytes and its figures.

The engine sees progress as phase messages ("compile", "run", "time") and holds each phase to a
deadline; the judge holds each runner command to the same deadlines and kills a runner that hangs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

import torch

from engine.gate.correctness import (
    CandidateRejected,
    as_list,
    build_model,
    check_error,
    check_inputs_unchanged,
    check_not_constant,
    check_structure,
    compute_reference,
    fingerprint,
    make_inputs,
    nonfinite_count,
    reference_precision,
    unwritten_or_nan,
)
from engine.gate.precision import infer_precision, join_precisions
from engine.gate.torch_use import RANDOM_ATEN_OPS, check_torch_use
from engine.jobs import MACHINE_FAULT, REFERENCE_FAILED
from engine.problems.loader import ProblemError, import_module_from
from engine.problems.trace import expand_equivalents
from engine.runner.cuda_share import CudaShareError
from engine.runner.exchange import ExchangeError, decode_values, encode_values, read_tensor
from engine.worker import device_memory
from engine.worker.device_exchange import SHARE_MIN_BYTES, DeviceExchange
from engine.worker.failures import (
    classify_death,
    classify_reply,
    judge_machine_fault,
    sanitize,
)
from engine.worker.judged_timing import calibrate, time_size
from engine.worker.protocol import FRESH, SHARED, JudgeRequest, SizeSpec, Verdict
from engine.worker.reference_bank import ReferenceBank
from engine.worker.runner_pool import RunnerPool
from engine.worker.runner_process import RunnerFailed, RunnerProcess, links_in
from engine.worker.template import seed_cache

# Rejections that a re-check after timing turns into stale_output: the output went bad.
OUTPUT_REASONS = frozenset(
    "wrong_output nan_output unwritten_output constant_output wrong_shape bad_output_type".split()
)
DEFAULT_DEADLINES = {"compile": 180.0, "reference": 120.0, "run": 120.0, "time": 300.0}
# Verdicts after which a runner may serve its owner's next evaluation: a pass, and rejections of
# what the candidate computed or failed to compile, which leave nothing wrong with the runner (its
# reset still checks). Any other (a crash, a timeout, tampering of any kind, memory, a machine
# fault) ends the runner.
LENT_AGAIN_AFTER = frozenset({None, "wrong_output", "nan_output", "unwritten_output",
                              "constant_output", "wrong_shape", "bad_output_type", "mutates_input",
                              "compile_error", "launch_error"})  # fmt: skip
# What reading a reply of the wrong shape raises in the judge.
MALFORMED_REPLY = (KeyError, TypeError, AttributeError, ValueError, IndexError)


class ReferenceFailed(Exception):
    """The problem's own Model raised on its inputs: nothing can be judged against it."""


class Evaluation:
    """State of one request: the runner holding the candidate, the phase, what was measured."""

    def __init__(self, request: JudgeRequest, send_phase, take_turn, runner: RunnerProcess,
                 bank: ReferenceBank):  # fmt: skip
        self.request = request
        self.take_turn = take_turn
        self.bank = bank
        self.banked_before = dict(bank.counts)
        self.problem_digest = ""  # of the problem file's text, once run() has read it
        self.send_phase = send_phase
        self.runner = runner
        self.device = request.device
        self.deadlines = {**DEFAULT_DEADLINES, **request.deadlines}
        self.replaced = expand_equivalents(request.replaces)
        # A candidate may draw random numbers where the Model does (from the same seed).
        draws = RANDOM_ATEN_OPS if request.draws_random else frozenset()
        self.allowed_ops = frozenset(request.allowed_torch_ops) | draws
        self.policy = request.precision_policy
        self.phase = "compile"
        self.loaded = False  # whether the candidate's code is in the runner yet
        self.launched = False
        self.errors: list[tuple[float, float]] = []
        self.precisions: list[str] = []
        self.calls = 0
        self.calibration: tuple | None = None
        self.checked_sizes: list[str] = []  # sizes whose output was compared before timing
        self.memory_notes: list[str] = []  # what the device's memory made this evaluation do
        share = runner.share if runner is not None else None
        self.share = DeviceExchange(share) if share is not None else None

    # --- talking to the runner
    def enter(self, phase: str) -> None:
        self.phase = phase
        self.send_phase(phase)

    def outgoing(self, message: dict) -> dict:
        """`message` as sent: with the GPU memory it shares, where memory is shared."""
        return self.share.send(message) if self.share else message

    def ask(self, message: dict, what: str) -> dict:
        """One runner command under the current phase's deadline; an error reply rejects."""
        reply = self.runner.request(self.outgoing(message), self.deadlines[self.phase], what)
        rejected = classify_reply(reply, self.phase)
        if rejected:
            raise CandidateRejected(*rejected)
        return reply

    @contextlib.contextmanager
    def judging(self):
        """The judge's own GPU work (inputs, weights, the float64 reference): the "reference"
        phase, which the ledger counts apart from the candidate's compile, check and time."""
        previous = self.phase
        self.enter("reference")
        try:
            yield
        finally:
            self.enter(previous)

    def next_run(self) -> None:
        """The candidate's first call compiles its kernels: under the compile deadline."""
        self.enter("run" if self.launched else "compile")
        self.launched = True

    def tag(self) -> str:
        self.calls += 1
        return f"c{self.calls}"

    def read_outputs(self, reply: dict, expected: list) -> list[torch.Tensor]:
        """The outputs rebuilt from the runner's bytes (or copied from the buffers the judge
        gave it) as plain tensors of the reference's dtype and shape, on the judge's device."""
        described, buffers = reply.get("outputs", []), reply.get("out", [])
        check_structure(described, expected)
        try:
            return [
                self.share.tensor(buffers[i])
                if d["tensor"].get("in_buffer") and self.share and i < len(buffers)
                else read_tensor(self.runner.exchange, d["tensor"]).to(self.device)
                for i, d in enumerate(described)
            ]
        except (ExchangeError, OSError) as exc:
            raise CandidateRejected("protocol_violation", f"unreadable output: {exc}") from exc

    # --- the candidate in the runner
    def load(self) -> None:
        self.enter("compile")
        self.loaded = True
        self.ask({"op": "load", "source": self.request.source}, "importing the candidate")

    def build_reference(self, problem, size: SizeSpec):
        request = self.request
        return build_model(problem, size.params, request.model_seed, self.device,
                           request.draws_random)  # fmt: skip

    def build(self, model, init: list, seed: int) -> None:
        """ModelNew built in the runner with the Model's weights (big ones on cuda cross as
        shared GPU memory, released once it has loaded them)."""
        weights = model.state_dict()
        message = {
            "op": "build",
            "init": encode_values(self.runner.exchange, f"i{self.tag()}_", init),
            "seed": seed,
            "draws": self.request.draws_random,
            "state": dict(zip(weights, self.encode(list(weights.values())), strict=True)),
        }
        try:
            self.ask(message, "building ModelNew")
        finally:
            self.release_shared()

    def encode(self, inputs: list) -> list[dict]:
        if self.share:
            return self.share.encode(self.runner.exchange, f"{self.tag()}_arg", inputs)
        return encode_values(self.runner.exchange, f"{self.tag()}_arg", inputs)

    def call(self, inputs: list, poison: str, expected: list) -> dict:
        encoded = self.encode(inputs)
        message = {"op": "call", "inputs": encoded, "poison": poison, "tag": self.tag()}
        if self.share:
            message["out"] = self.share.output_buffers(expected)
        reply = self.ask(message, "one run")
        return {**reply, "sent": encoded, "out": message.get("out", [])}

    def inputs_after(self, reply: dict) -> list:
        """The inputs as the call left them: the very memory the runner used where it was
        shared (files on cpu, GPU buffers on cuda), else the runner's copy back."""
        sent = reply["sent"]
        after = sent if self.device == "cpu" else reply.get("inputs_after", [])
        try:
            return [
                self.share.tensor_view(s["shared"])  # read in place, before it is released
                if "shared" in s
                else decode_values(self.runner.exchange, [a], "cpu")[0]
                for s, a in zip(sent, after, strict=True)
            ]
        except (ExchangeError, OSError, KeyError, TypeError) as exc:
            raise CandidateRejected("protocol_violation", f"unreadable inputs: {exc}") from exc

    # --- the checks
    def precision(self, inputs: list) -> str:
        floats = [x.dtype for x in inputs if torch.is_tensor(x) and x.is_floating_point()]
        dtype = str(floats[0]).removeprefix("torch.") if floats else "float32"
        return infer_precision(self.request.source, dtype)

    def reference(self, problem, model, size: SizeSpec, seed: int):
        """The reference for the input set of `seed`, from the bank when it holds it."""
        key = (self.problem_digest, json.dumps(size.params, sort_keys=True),
               self.request.model_seed, seed, self.device, self.policy)  # fmt: skip
        with self.judging():
            return self.bank.get(key, lambda: self.compute_reference(problem, model, size, seed))

    def compute_reference(self, problem, model, size: SizeSpec, seed: int):
        """The reference, its float64 part moved to host memory where a checked call would not
        fit beside it on the device (engine.worker.device_memory)."""
        inputs = make_inputs(problem, size.params, seed, self.device)
        try:
            reference = compute_reference(model, inputs)
        except Exception as exc:
            if judge_machine_fault(exc) is not None:
                raise  # out of memory, a lost GPU: the machine's (evaluate)
            raise ReferenceFailed(
                f"the problem's Model raised on its own inputs at {size.label}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if self.device != "cuda":  # the device is host memory
            return reference
        in_bytes = device_memory.tensor_bytes(reference.inputs)
        out_bytes = device_memory.tensor_bytes(reference.expected)
        if device_memory.reference_to_host(in_bytes, out_bytes, device_memory.free_bytes("cuda")):
            reference.ref64 = [r.cpu() for r in reference.ref64]
            self.note(f"the float64 reference at {size.label} waited in host memory")
        return reference

    def note(self, what: str) -> None:
        if what not in self.memory_notes:
            self.memory_notes.append(what)

    def check_once(self, model, reference, earlier: dict) -> tuple:
        """One guarded call of the candidate on the reference's inputs, judged against it.
        `earlier` maps the fingerprints of earlier outputs to those of their references (the
        float64 one and PyTorch's own): an output seen before is stale unless a reference repeats
        too (a ReLU of mostly negative values can be all zeros for every input; a deep net at a
        7x7 input can give PyTorch's fp32 the same output for every input, its float64 reference
        differing in the last bits)."""
        self.next_run()
        try:
            outputs = self.checked_call(reference)
        finally:
            self.release_shared()
        print_ = fingerprint(outputs)
        references = (reference.ref_print, reference.expected_print)
        then = earlier.get(print_, references)
        if then[0] != references[0] and then[1] != references[1]:
            raise CandidateRejected(
                "stale_output",
                "returned the same output as for an earlier, different input; compute the output "
                "from this call's inputs, never from a cache",
            )
        precision = self.precision(reference.inputs)
        error, tolerance = check_error(outputs, reference, self.request, self.policy, precision)
        self.errors.append((error, tolerance))
        self.precisions.append(precision)
        return print_, references

    def checked_call(self, reference) -> list[torch.Tensor]:
        """The outputs of one call on the reference's inputs, after the checks of the call
        itself: operators, inputs unchanged, every output element written, not constant."""
        expected = reference.expected
        reply = self.call(reference.inputs, "nan", expected)
        check_torch_use(list(map(str, reply.get("ops", []))), self.replaced, self.allowed_ops)
        outputs = self.read_outputs(reply, expected)
        check_inputs_unchanged(reference, self.inputs_after(reply))
        for i, (o, r, e) in enumerate(zip(outputs, reference.ref64, expected, strict=True)):
            with_nan = nonfinite_count(o, r)
            if with_nan:
                again = self.call(reference.inputs, "finite", expected)
                o2 = self.read_outputs(again, expected)[i]
                raise unwritten_or_nan(i, o.numel(), with_nan, nonfinite_count(o2, r))
            check_not_constant(i, o, r, e)
        return outputs

    def release_shared(self) -> None:
        if self.share:
            self.share.close()

    def probe_sharing(self) -> None:
        """Whether GPU memory shared with this fresh runner arrives intact, asked before any
        candidate code is in it; where it does not, tensors cross as files from now on."""
        if not self.share:
            return
        probe = torch.arange(SHARE_MIN_BYTES // 4, dtype=torch.float32, device=self.device)
        try:
            message = {"op": "share_probe", "inputs": self.encode([probe]),
                       "out": self.share.output_buffers([probe])}  # fmt: skip
            reply = self.runner.request(
                self.outgoing(message), self.deadlines["compile"], "sharing"
            )
            works = "error" not in reply and torch.equal(
                self.share.tensor(message["out"][0]), probe
            )
        except CudaShareError:
            works = False
        self.release_shared()
        if not works:
            self.share = None
            self.runner.template.share_works = False

    def check(self, problem, size: SizeSpec) -> None:
        with self.judging():
            model, init = self.build_reference(problem, size)
        self.build(model, init, self.request.model_seed)
        prints: dict = {}
        for seed in self.request.check_seeds:
            reference = self.reference(problem, model, size, seed)
            output_print, references = self.check_once(model, reference, prints)
            prints[output_print] = references
            del reference  # before the next one is computed

    def time_and_recheck(self, problem, size: SizeSpec) -> dict:
        """Raw samples for one size, then the timed instance checked again on a fresh seed."""
        timing = self.request.timing
        model_seed = self.request.model_seed
        with self.judging():
            model, init = self.build_reference(problem, size)
        self.build(model, init, model_seed)
        with self.judging():
            input_sets = self.input_sets(problem, model, size, timing)
        self.next_run()
        try:
            samples = time_size(self, model, input_sets, timing, self.calibration)
        except CandidateRejected as exc:
            if exc.reason != "stale_output" or size.label in self.checked_sizes:
                raise
            # a size first compared here: its output is wrong, not stale
            what = exc.message.split(":")[0]
            raise CandidateRejected("wrong_output", f"at {size.label}, {what}") from exc
        finally:
            self.release_shared()
        del input_sets
        self.ask({"op": "time_end"}, "ending the timing")
        recheck = self.reference(problem, model, size, timing.recheck_seed)
        try:
            self.check_once(model, recheck, {})
        except CandidateRejected as exc:
            if exc.reason not in OUTPUT_REASONS or size.label not in self.checked_sizes:
                raise  # a size first checked here: its output is wrong, not stale
            raise CandidateRejected(
                "stale_output",
                f"correct before timing, wrong after {timing.warmup + len(samples['cand'])} timed "
                f"calls on a fresh input: {exc.message}; do not cache outputs or state between "
                "calls",
            ) from exc
        return samples

    def input_sets(self, problem, model, size: SizeSpec, timing) -> list[list]:
        """The timing's input sets, as many of those it asks for as fit in the device's memory
        (engine.worker.device_memory)."""
        first = make_inputs(problem, size.params, timing.seed, self.device)
        wanted = max(1, timing.input_sets)
        if wanted == 1:
            return [first]
        with torch.no_grad():
            out_bytes = device_memory.tensor_bytes(as_list(model(*first)))
        fit = device_memory.input_sets_that_fit(
            wanted,
            device_memory.tensor_bytes(first),
            out_bytes,
            device_memory.free_bytes(self.device),
        )
        if fit < wanted:
            self.note(
                f"timed over {fit} of {wanted} input sets at {size.label}: the device's "
                "free memory holds no more"
            )
        return [first] + [make_inputs(problem, size.params, timing.seed + k, self.device)
                          for k in range(1, fit)]  # fmt: skip

    def run(self) -> Verdict:
        reference_precision(self.policy)
        path = Path(self.request.problem_path)
        try:
            self.problem_digest = hashlib.sha256(path.read_bytes()).hexdigest()
            problem = import_module_from(path, "problem")
        except (ProblemError, OSError) as exc:
            raise CandidateRejected("launch_error", f"the problem file failed: {exc}") from exc
        fresh = self.runner.evaluations == 1  # no candidate has been in it
        if fresh:
            self.probe_sharing()  # before any candidate code is in the runner
        self.runner.wait_ready(self.deadlines["compile"])
        self.take_turn()  # the runner has started: from here on, the GPU is this request's
        if self.request.timing and fresh:  # a lent runner keeps its first calibration
            self.runner.calibration = calibrate(self.runner, self.deadlines["compile"])
        self.calibration = self.runner.calibration
        self.load()
        sizes = self.request.sizes
        # Without check seeds, an earlier evaluation checked the candidate at every size.
        self.checked_sizes = [s.label for s in sizes]
        if self.request.check_seeds:
            self.checked_sizes = list(self.request.check_sizes) or self.checked_sizes
            for size in sizes:
                if size.label in self.checked_sizes:
                    self.check(problem, size)
        samples = {}
        if self.request.timing:
            for size in sizes:
                samples[size.label] = self.time_and_recheck(problem, size)
        return self.verdict(passed=True, samples=samples)

    def judged(self) -> Verdict:
        """The verdict of `run`, a failure of the candidate's turned into its rejection."""
        try:
            return self.run()
        except CandidateRejected as exc:
            return self.verdict(passed=False, reason=exc.reason, message=exc.message)
        except RunnerFailed as exc:
            if not self.loaded:
                message = sanitize(f"the runner failed before the candidate was loaded: {exc}")
                return self.verdict(passed=False, reason=MACHINE_FAULT, message=message)
            reason, message = classify_death(exc.kind, exc.message)
            return self.verdict(passed=False, reason=reason, message=message)
        except MALFORMED_REPLY as exc:  # a reply of the wrong shape: from the candidate's side
            message = sanitize(f"the runner's reply was malformed ({type(exc).__name__}: {exc})")
            return self.verdict(passed=False, reason="protocol_violation", message=message)

    def reset_runner(self, verdict: Verdict) -> bool:
        """Have the runner forget the candidate; whether it may serve another evaluation. A
        candidate that changed the runner's process-wide state, which the next would inherit,
        is rejected for it where it had passed (runner_tampered)."""
        try:
            reply = self.runner.request({"op": "reset"}, self.deadlines["run"], "resetting")
        except RunnerFailed:
            return False
        changed = reply.get("changed")
        if not isinstance(changed, list) or not all(isinstance(c, str) for c in changed):
            return False
        if changed and verdict.passed:
            verdict.passed, verdict.reason, verdict.samples = False, "runner_tampered", {}
            verdict.message = sanitize(
                f"the candidate changed the runner's process-wide state ({', '.join(changed[:6])})"
                ", which every later candidate would inherit: leave torch's settings, the "
                "environment and installed functions as the module found them"
            )
        return not changed

    def verdict(self, passed: bool, reason=None, message="", samples=None) -> Verdict:
        worst = max(self.errors, default=(None, None), key=lambda e: e[0] / max(e[1], 1e-300))
        references = {
            "banked": self.bank.counts["hits"] - self.banked_before["hits"],
            "computed": self.bank.counts["misses"] - self.banked_before["misses"],
        }
        if passed and not message:
            message = "; ".join(self.memory_notes)
        return Verdict(passed, reason, message, error=worst[0], tolerance=worst[1],
                       precision=join_precisions(self.precisions), references=references,
                       samples=samples or {})  # fmt: skip


def evaluate(request: JudgeRequest, send_phase, take_turn, pool: RunnerPool, bank: ReferenceBank
             ) -> Verdict:  # fmt: skip
    """Judge one request in a runner of its owner's (engine.worker.runner_pool), its GPU work
    after `take_turn` returns; a candidate's failure is a rejection, never an exception. A runner
    that fails before the candidate's code is in it, and the judge's own memory or GPU failing,
    are the machine's (MACHINE_FAULT). The runner is lent again only after a clean evaluation and
    reset. The kernels compiled for the candidate are kept in `request.triton_cache` for its
    next runner and its profiles."""
    cache, owner = request.triton_cache, request.runner
    try:
        runner = pool.take(owner, cache, calibrated=request.timing is not None)
    except (RunnerFailed, OSError) as exc:  # OSError: no memory or processes left for a fork
        failed = Evaluation(request, send_phase, take_turn, None, bank)
        return failed.verdict(False, MACHINE_FAULT, sanitize(f"the runner could not start: {exc}"))
    kernels_before = set(_entries(runner.triton_cache))
    job = Evaluation(request, send_phase, take_turn, runner, bank)
    lend_again = False
    try:
        verdict = job.judged()
        if owner != FRESH and verdict.reason in LENT_AGAIN_AFTER:
            lend_again = job.reset_runner(verdict)
        return verdict
    except ReferenceFailed as exc:
        return job.verdict(passed=False, reason=REFERENCE_FAILED, message=sanitize(str(exc)))
    except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError, CudaShareError
        fault = judge_machine_fault(exc)
        if fault is None:
            raise
        bank.drop_device_entries()
        return job.verdict(passed=False, reason=MACHINE_FAULT, message=fault)
    finally:
        job.release_shared()
        if not lend_again:
            runner.close()  # dead before its box is read: nothing of it changes under the copy
        if cache and (not lend_again or owner == SHARED):  # a live one only with project code
            keep_kernels(runner.triton_cache, kernels_before, cache, pool.template.warm_cache)
        pool.give_back(runner, lend_again)
        if job.device == "cuda":  # the next runner needs the GPU memory this judge cached
            torch.cuda.empty_cache()


def _entries(folder: str) -> list[str]:
    return os.listdir(folder) if os.path.isdir(folder) else []


def keep_kernels(runner_cache: str, before: set[str], into: str, warm_cache: str) -> None:
    """Copy what the runner's Triton cache gained during the evaluation (the candidate's kernels
    and launchers; Triton's cache is content-addressed, so an entry present is already right),
    and Triton's driver utilities from the warm-up, into the candidate's own cache `into`."""
    os.makedirs(into, exist_ok=True)
    for name in set(_entries(runner_cache)) - before:
        source, target = os.path.join(runner_cache, name), os.path.join(into, name)
        # Triton's entries are folders; what else a candidate put there is not copied
        if os.path.isdir(source) and not os.path.islink(source) and not os.path.exists(target):
            shutil.copytree(source, target, symlinks=True, ignore=links_in)
    seed_cache(into, warm_cache)
