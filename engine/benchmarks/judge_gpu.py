"""The judge on a GPU, one JSON line per finding:

    python -m engine.benchmarks.judge_gpu [--out FILE]

- isolation: which sandbox candidates get on this machine;
- streams: a softmax kernel on the default stream and the same kernel on a private stream, timed
  by the judge at 4096x393216 (rejected, or timed no faster than on the default stream);
- tampering: a real kernel whose runner reports patched figures, and one that defers its work
  to the fetch of its output (both `timing_tampered`);
- census: a profiled evaluation at every full size, then the kernel census over them, of a valid
  kernel, of one whose output torch computes with the Python dispatch key excluded (the runner's
  operator log sees nothing; the kernels the profiler observes must reject it), and of the same
  behind 8 launches of its own kernel (past the profile's cap: only the census sees torch's);
- verdicts: the test candidates that must be rejected (input mutated, output partly written,
  NaN, cached) and a valid one, at softmax 4096x4096, where tensors cross as shared GPU memory;
- precision: PyTorch's own fp32 error against float64 with TF32 off and on at each problem's
  first full size (the factor of the strict rule), and a linear_relu_div GEMM with tl.dot in
  ieee, tf32x3 and tf32 judged under strict;

(engine.benchmarks.rung0_cost measures what one rung-0 evaluation costs.)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from engine.backends.local import LocalBackend
from engine.gate.correctness import build_model, compute_reference, make_inputs
from engine.jobs import EvalJob, EvalResult, RungSpec
from engine.problems import builtin_names, load_problem
from engine.problems.loader import import_module_from
from engine.worker.sandbox import isolation

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ROOT / "tests" / "candidates"
ONLINE = (CANDIDATES / "softmax_online.py").read_text()
# Test candidates whose verdicts must hold when tensors cross as shared GPU memory.
VERDICT_CANDIDATES = (
    "softmax_online", "softmax_mutates", "softmax_partial", "softmax_nan", "softmax_cached",
)  # fmt: skip
LAUNCH = "softmax_online_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=8)"
SIDE_STREAM = ONLINE.replace(
    LAUNCH,
    "self.stream = getattr(self, 'stream', None) or torch.cuda.Stream()\n"
    "        self.stream.wait_stream(torch.cuda.current_stream())\n"
    f"        with torch.cuda.stream(self.stream):\n            {LAUNCH}",
)
# torch computes the output with the Python dispatch key excluded: the runner's operator log
# (a dispatch mode) sees nothing; the Triton kernel runs only to be seen.
HIDES_FROM_THE_LOG = ONLINE.replace(
    "        return y",
    "        with torch._C._DisableTorchDispatch():\n"
    "            return getattr(torch, 'soft' + 'max')(x, 1)",
)
EIGHT_LAUNCHES = f"        for _ in range(8):\n            {LAUNCH}\n"
HIDES_BEHIND_LAUNCHES = HIDES_FROM_THE_LOG.replace(
    "        with torch._C", EIGHT_LAUNCHES + "        with torch._C"
)
PATCHED_FIGURES = (
    ONLINE
    + """
import sys
_session = sys.modules["kbrunner.session"].RunnerSession
_real_rep = _session.op_rep


def _fast_rep(self, message):
    _real_rep(self, message)
    return {"event_ms": 0.001, "host_ms": 0.002}


_session.op_rep = _fast_rep
"""
)
DEFERRED = (
    ONLINE.replace(
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        if getattr(self, 'timing', False):\n"
        "            self.pending = x\n"
        "            return torch.empty_like(x)\n",
    )
    + """
import sys
_session = sys.modules["kbrunner.session"].RunnerSession
_begin, _fetch = _session.op_time_begin, _session.op_fetch


def _timed_begin(self, message):
    reply = _begin(self, message)
    self.model.timing = True
    return reply


def _lazy_fetch(self, message):
    self.last_output = self.model.__class__.forward(
        type("Eager", (), {"timing": False})(), self.model.pending
    )
    return _fetch(self, message)


_session.op_time_begin, _session.op_fetch = _timed_begin, _lazy_fetch
"""
)


def emit(out, record: dict) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    out.write(line + "\n")
    out.flush()


def summary(result) -> dict:
    return {
        "passed": result.passed, "reason": result.reason, "message": result.message[:400],
        "error": result.error, "tolerance": result.tolerance, "precision": result.precision,
        "gpu_seconds": result.gpu_seconds,
        "timings": {t.size_label: {"cand_median_ms": t.stats.median,
                                   "ref_median_ms": t.ref_stats.median,
                                   "speedup": t.speedup} for t in result.timings},
    }  # fmt: skip


def evaluate(backend, problem, source: str, labels: tuple, seed: int, reps: int = 10):
    """The judge's verdict and timings (the engine's static rules are skipped: the attacks here
    would not get past them, and the judge is what is measured)."""
    sizes = [problem.size(label) for label in labels]
    timing = {"seed": seed, "recheck_seed": seed + 1, "warmup": 3, "reps": reps,
              "input_sets": 2, "interleave": True}  # fmt: skip
    started = time.monotonic()
    result = backend.judge(problem, source, sizes, check_seeds=[seed + 2], timing=timing)
    return {**summary(result), "wall_s": time.monotonic() - started}


def torch_errors(name: str) -> dict:
    """PyTorch's own fp32 error against float64 at the first full size, TF32 off and on."""
    problem = load_problem(name)
    module = import_module_from(problem.path, "problem")
    params = problem.full[0].params
    model, _ = build_model(module, params, 0, "cuda")
    inputs = make_inputs(module, params, 0, "cuda")
    errors = {}
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        errors["tf32" if tf32 else "fp32"] = compute_reference(model, inputs).torch_error
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    del model, inputs
    torch.cuda.empty_cache()
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.benchmarks.judge_gpu")
    parser.add_argument("--out", default="judge_gpu.jsonl")
    parser.add_argument("--parts", default="isolation,streams,tampering,census,verdicts,precision")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    backend = LocalBackend("cuda")
    softmax = load_problem("softmax")
    big = (softmax.full[0].label,)
    with open(args.out, "a") as out:
        if "isolation" in parts:
            emit(out, {"part": "isolation", "detail": isolation().detail})
        if "streams" in parts:
            for name, source in (("default_stream", ONLINE), ("private_stream", SIDE_STREAM)):
                emit(out, {"part": "streams", "candidate": name,
                           **evaluate(backend, softmax, source, big, seed=1)})  # fmt: skip
        if "tampering" in parts:
            for name, source in (("patched_figures", PATCHED_FIGURES), ("deferred", DEFERRED)):
                emit(out, {"part": "tampering", "candidate": name,
                           **evaluate(backend, softmax, source, big, seed=2)})  # fmt: skip
        if "census" in parts:
            labels = tuple(s.label for s in softmax.full)
            rung = RungSpec(0, labels, warmup=3, reps=10, input_sets=2, profile=True)
            for name, source in (("valid", ONLINE), ("hides_from_the_log", HIDES_FROM_THE_LOG),
                                 ("hides_behind_launches", HIDES_BEHIND_LAUNCHES)):  # fmt: skip
                # check=False: the engine's static rules (which refuse torch._C by name) stay out
                result = backend.evaluate(softmax, EvalJob(name, source, rung, seed=4, check=False))
                kernels = [
                    k.get("name", "")[:120] for k in (result.profile or {}).get("kernels", [])
                ]
                censused = EvalResult(True)  # the census alone, whatever the profile found
                backend.census(softmax, source, labels, censused)
                emit(out, {"part": "census", "candidate": name, **summary(result),
                           "profile_status": (result.profile or {}).get("status"),
                           "profile_kernels": kernels, "census": censused.census,
                           "census_reason": censused.reason, "census_message": censused.message,
                           "census_seconds": censused.gpu_seconds})  # fmt: skip
        if "verdicts" in parts:
            mid = (softmax.full[1].label,)  # 4096x4096: 64 MiB tensors, shared, not files
            for name in VERDICT_CANDIDATES:
                source = (CANDIDATES / f"{name}.py").read_text()
                emit(out, {"part": "verdicts", "candidate": name,
                           **evaluate(backend, softmax, source, mid, seed=5)})  # fmt: skip
        if "precision" in parts:
            for name in builtin_names():
                emit(out, {"part": "precision", "problem": name, **torch_errors(name)})
            gemm = load_problem("linear_relu_div")
            ieee = (CANDIDATES / "linear_relu_div_valid.py").read_text()
            labels = tuple(s.label for s in gemm.full)
            for precision in ("ieee", "tf32x3", "tf32"):
                source = ieee.replace('input_precision="ieee"', f'input_precision="{precision}"')
                result = evaluate(backend, gemm, source, labels, seed=3)
                emit(out, {"part": "precision", "problem": "linear_relu_div", "dot": precision,
                           **result})  # fmt: skip
    backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
