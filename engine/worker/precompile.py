"""Compiling a candidate's kernels ahead of its first timing, in the compile box: a runner forked
from a template of device "compile" (no GPU, compile-only mode: engine.runner.compile_only)
calls the candidate's forward on meta tensors at each target size, so that every kernel it
launches there is compiled for the GPU's target into the candidate's Triton cache. The timing
runner, seeded with that cache, then finds its kernels compiled instead of compiling them while
it holds the GPU.

Only a Triton compile error rejects, or a kernel beyond the target's shared memory: the same
source and specialization fail on the GPU too.
Anything else that goes wrong here (a forward that needs real values, an import that asks for a
GPU) leaves the candidate to compile in its timing runner, as it would have without this.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.gate.correctness import make_inputs
from engine.problems.loader import ProblemError, import_module_from
from engine.problems.trace import module_model_on_meta
from engine.runner.calls import call_with_size
from engine.runner.exchange import describe_meta, encode_values
from engine.worker.failures import classify_death, classify_error, sanitize
from engine.worker.judge import DEFAULT_DEADLINES, MALFORMED_REPLY
from engine.worker.protocol import JudgeRequest, SizeSpec
from engine.worker.runner_process import RunnerFailed
from engine.worker.sandbox import TRITON_CACHE_NAME
from engine.worker.template import RunnerTemplate


def outcome(status: str, reason=None, message="", compiled=(), skipped=None) -> dict:
    """`status`: "compiled" (at the sizes in `compiled`), "rejected" (a compile error or a
    compile past its deadline) or "skipped" (why in `message`: the timing runner compiles)."""
    return {"status": status, "reason": reason, "message": message, "compiled": list(compiled),
            "skipped": skipped or {}, "fatal": False}  # fmt: skip


def describe_size(problem, size: SizeSpec, model_seed: int, exchange: str) -> dict:
    """The compile command for one size: its arguments as shapes, dtypes and strides alone
    (meta tensors: a 6 GB input costs nothing here), plain values as they are."""
    model = module_model_on_meta(problem, size.params)
    init = list(call_with_size(problem.get_init_inputs, size.params))
    inputs = make_inputs(problem, size.params, 0, "meta")
    tag = hashlib.sha256(size.label.encode()).hexdigest()[:8]
    return {
        "op": "compile",
        "seed": model_seed,
        "init": encode_values(exchange, f"init{tag}_", init),
        "state": {k: describe_meta(v) for k, v in model.state_dict().items()},
        "inputs": encode_values(exchange, f"in{tag}_", inputs),
    }


def precompile(request: JudgeRequest, template: RunnerTemplate) -> dict:
    """Compile one candidate at the request's sizes, each under the judge's compile deadline
    (which a first launch that compiles on the GPU gets); never raises for a bad candidate."""
    try:
        problem = import_module_from(Path(request.problem_path), "problem")
    except (ProblemError, OSError) as exc:
        return outcome("skipped", message=f"the problem file failed: {exc}")
    try:
        runner = template.fork()
    except RunnerFailed as exc:
        return outcome("skipped", message=f"no compile runner: {exc.message}")
    deadline = {**DEFAULT_DEADLINES, **request.deadlines}["compile"]
    compiled, skipped = [], {}
    try:
        reply = runner.request({"op": "load", "source": request.source}, deadline, "import")
        if "error" in reply:
            return outcome("skipped", message="the candidate does not import without a GPU")
        for size in request.sizes:
            label = size.label
            try:
                command = describe_size(problem, size, request.model_seed, runner.exchange)
            except Exception as exc:  # the problem's own code, on meta tensors
                skipped[label] = sanitize(f"no meta inputs: {exc}", 300)
                continue
            reply = runner.request(command, deadline, f"compiling the kernels at {label}")
            if "error" in reply and reply["error"].get("compile") is True:
                return outcome("rejected", *classify_error(reply["error"], "compile"))
            if reply.get("compiled") is True:
                compiled.append(label)
            else:
                skipped[label] = sanitize(reply.get("skipped", "compiling ahead failed"), 300)
        return outcome("compiled", compiled=compiled, skipped=skipped)
    except RunnerFailed as exc:
        if exc.kind == "timeout":  # its first launch on the GPU would pass the same deadline
            return outcome("rejected", *classify_death(exc.kind, exc.message))
        return outcome("skipped", message=sanitize(f"the compile runner failed: {exc}", 300))
    except MALFORMED_REPLY as exc:
        return outcome("skipped", message=sanitize(f"a malformed reply ({exc})", 300))
    finally:
        runner.close(keep=f"{runner.exchange}/{TRITON_CACHE_NAME}", into=request.triton_cache)
