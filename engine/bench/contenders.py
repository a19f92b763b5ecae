"""`python -m engine.bench.contenders`: the bench's timing subprocess for the problem's own code.
Library code runs here, never in the engine process; candidate code never runs here (the judge
times candidates, in its sandboxed runners).

One JSON request on stdin. kind "ceilings": the device's copy bandwidth and matmul FLOP/s in
fp32 (strict), tf32 and fp16. kind "sizes": at each size, PyTorch eager (the reference Model at
PyTorch's defaults, or with TF32 enabled under the tf32 precision policy) and
torch.compile(Model) (default mode, compiled once, its compile time reported apart), timed
interleaved in a rotating order with the L2 flushed before every repetition. Results go out one
JSON line at a time on a private copy of stdout, so a timeout loses only the sizes not yet done.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from engine.gate.correctness import make_inputs, reference_precision
from engine.problems.loader import import_module_from
from engine.runner.calls import call_with_size
from engine.timing.bench import make_timer, time_round_robin
from engine.timing.stats import summarize

# Ceiling probes: large enough to reach the device's peak, small enough to take a second or two.
COPY_BYTES = {"cuda": 1 << 30, "cpu": 64 << 20}
MATMUL_N = {"cuda": 8192, "cpu": 512}
CEILING_REPS = 20
ERROR_CHARS = 400  # tracebacks of torch.compile run to pages; the first lines say what failed


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:ERROR_CHARS]}"


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_ms(fn, args, timer, reps: int) -> float:
    fn(*args)
    return summarize(timer.resolve([timer.measure(fn, args) for _ in range(reps)])).median


def measure_ceilings(device: str) -> dict:
    """Copy bandwidth (bytes read + written per second) and matmul FLOP/s by precision."""
    timer = make_timer(device)
    src = torch.randn(COPY_BYTES[device] // 4, device=device)
    dst = torch.empty_like(src)
    copy_ms = median_ms(dst.copy_, (src,), timer, CEILING_REPS)
    ceilings = {"copy_bytes_per_s": 2 * src.nbytes / (copy_ms / 1e3)}
    del src, dst
    n = MATMUL_N[device]
    for name, dtype, fp32_precision in (
        ("fp32", torch.float32, "highest"),  # strict: no TF32
        ("tf32", torch.float32, "high"),
        ("fp16", torch.float16, "highest"),
    ):
        torch.set_float32_matmul_precision(fp32_precision)
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        ms = median_ms(torch.mm, (a, b), timer, CEILING_REPS)
        ceilings[f"{name}_flops_per_s"] = 2 * n**3 / (ms / 1e3)
    torch.set_float32_matmul_precision("highest")
    device_name = torch.cuda.get_device_name() if device == "cuda" else platform.machine()
    return {"event": "ceilings", "ceilings": ceilings, "device_name": device_name,
            "torch": torch.__version__, "triton": _triton_version()}  # fmt: skip


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def reference_model(problem, params: dict, seed: int, device: str):
    init = list(call_with_size(problem.get_init_inputs, params))
    with torch.device(device):
        torch.manual_seed(seed)
        return problem.Model(*init).eval()


def time_size(problem, size: dict, request: dict) -> dict:
    """One size: build, compile, warm up, time; a contender that fails is reported and left
    out, the other is still timed."""
    device, params, seed = request["device"], size["params"], request["seed"]
    out = {"event": "size", "label": size["label"], "samples": {}, "errors": {},
           "compile_seconds": None}  # fmt: skip
    contenders = {"eager": reference_model(problem, params, seed, device)}
    input_sets = [
        make_inputs(problem, params, seed + k, device) for k in range(request["input_sets"])
    ]
    with torch.no_grad():
        if request["compile"]:
            torch._dynamo.reset()  # a fresh compile for this size: static shapes, no reuse
            compiled = torch.compile(contenders["eager"])
            start = time.perf_counter()
            try:
                compiled(*input_sets[0])
                synchronize(device)
                out["compile_seconds"] = time.perf_counter() - start
                contenders["compile"] = compiled
            except Exception as exc:
                out["errors"]["compile"] = f"torch.compile failed: {describe(exc)}"
        for name, fn in list(contenders.items()):
            try:
                for r in range(request["warmup"]):
                    fn(*input_sets[r % len(input_sets)])
                synchronize(device)
            except Exception as exc:
                out["errors"][name] = f"running it failed: {describe(exc)}"
                del contenders[name]
        if contenders:
            timer = make_timer(device)
            out["samples"] = time_round_robin(contenders, input_sets, request["reps"], timer)
    return out


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever a candidate or a compiler prints goes to stderr
    sys.stdout = sys.stderr

    def send(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    request = json.loads(sys.stdin.read())
    if request["kind"] == "ceilings":
        send(measure_ceilings(request["device"]))
        return 0
    problem = import_module_from(Path(request["problem_path"]), "problem")
    reference_precision(request["precision_policy"])
    for size in request["sizes"]:
        send(time_size(problem, size, request))
        gc.collect()
        if request["device"] == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
