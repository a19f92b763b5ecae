"""`python -S -m kbrunner.profile_launch` (inside the sandbox, under Nsight Compute): one forward
call of the candidate inside an NVTX range, at each size asked for.

Reads profile.json from the exchange folder ({"problem": file, "candidate": file, "sizes": [params,
...]}). Once started it writes READY_FILE there and waits for GO_FILE: the engine writes it when
the GPU is this program's (engine.profiler.ncu.run_in_turn); nothing before touches the GPU or
runs the candidate's code. For each size in turn it builds the inputs on cuda and ModelNew like
Model, warms up twice (Triton compiles there, or finds the evaluation's kernels in its cache),
then pushes NVTX_RANGE around exactly one forward call. Every call is made as the judge's timed
calls are (`profiled_calls`), so the kernels listed are a timed call's however forward branches
on the modes. It writes
facts.json: {"bytes_min": for one size, the bytes of the inputs, the module's parameters and
buffers and the outputs, which any implementation must move at least once}.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time

import torch

from .calls import call_with_size

NVTX_RANGE = "kernelbrain_profile"
WARMUP_CALLS = 2
READY_FILE, GO_FILE = "started", "go"
GO_POLL_S, GO_WAIT_S = 0.005, 3600.0  # an engine that never says go is gone: stop waiting


def wait_for_turn(exchange: str) -> bool:
    """Say this program has started, then wait for the engine's go; False when none came."""
    open(os.path.join(exchange, READY_FILE), "w").close()
    go, deadline = os.path.join(exchange, GO_FILE), time.monotonic() + GO_WAIT_S
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            return False
        time.sleep(GO_POLL_S)
    return True


def tensor_bytes(values) -> int:
    values = values if isinstance(values, (list, tuple)) else [values]
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def import_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profiled_calls(model, inputs: list, marked) -> object:
    """The warm-up calls of one size, then one inside `marked` (the NVTX range), all made as the
    judge's runner times forward (engine.runner.session: the model in eval mode, autograd off);
    the marked call's output."""
    if isinstance(model, torch.nn.Module):
        model.eval()
    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            model(*inputs)
        with marked():
            return model(*inputs)


@contextlib.contextmanager
def nvtx_range():
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    yield
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def run_in_range(reference, candidate, params: dict) -> dict:
    torch.manual_seed(0)
    with torch.device("cuda"):
        inputs = call_with_size(reference.get_inputs, params)
        model = candidate.ModelNew(*call_with_size(reference.get_init_inputs, params))
    output = profiled_calls(model, inputs, nvtx_range)
    state = [*model.parameters(), *model.buffers()]
    return {"bytes_min": tensor_bytes(inputs) + tensor_bytes(state) + tensor_bytes(output)}


def run_sizes(reference, candidate, sizes: list[dict]) -> dict:
    """One range a size, one size's tensors alive at a time."""
    facts = [run_in_range(reference, candidate, params) for params in sizes]
    return facts[0] if len(facts) == 1 else {"bytes_min": None}


def main() -> int:
    exchange = os.environ["KB_EXCHANGE"]
    with open(os.path.join(exchange, "profile.json")) as f:
        spec = json.load(f)
    if not wait_for_turn(exchange):
        print(f"no turn on the GPU came within {GO_WAIT_S:g} s", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("no CUDA GPU: the profiler launcher needs one", file=sys.stderr)
        return 2
    reference = import_file(os.path.join(exchange, spec["problem"]), "problem")
    candidate = import_file(os.path.join(exchange, spec["candidate"]), "candidate")
    facts = run_sizes(reference, candidate, spec["sizes"])
    with open(os.path.join(exchange, "facts.json"), "w") as f:
        json.dump(facts, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
