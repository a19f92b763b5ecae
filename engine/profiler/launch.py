"""Run one candidate forward call inside an NVTX range, for Nsight Compute to profile.

python -m engine.profiler.launch --problem PATH --candidate PATH --size LABEL [--facts OUT.json]

Builds the size's inputs on cuda, builds ModelNew like Model, warms up twice (Triton compiles
there), then pushes NVTX_RANGE around exactly one forward call. Every kernel that call launches
lies in the range. --facts receives {"bytes_min": ...}: the bytes of the inputs, the module's
parameters and buffers, and the outputs, which any implementation must move at least once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from engine.problems import ProblemError, load_problem
from engine.problems.loader import call_with_size, import_module_from

NVTX_RANGE = "kernelbrain_profile"
WARMUP_CALLS = 2


def tensor_bytes(values) -> int:
    values = values if isinstance(values, (list, tuple)) else [values]
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def prepare(problem_path: str, candidate_path: str, size_label: str):
    """(reference module, candidate module, size parameters); ProblemError when unusable."""
    problem = load_problem(problem_path)
    try:
        params = problem.size(size_label).params
    except KeyError as exc:
        labels = ", ".join(s.label for s in problem.sizes)
        raise ProblemError(f"{exc.args[0]}; its sizes are: {labels}") from exc
    reference = import_module_from(problem.path, "problem")
    candidate = import_module_from(Path(candidate_path), "candidate")
    if not hasattr(candidate, "ModelNew"):
        raise ProblemError(f"{candidate_path}: defines no `ModelNew`")
    return reference, candidate, params


def run_in_range(reference, candidate, params: dict) -> dict:
    """Warm up, then one forward call inside NVTX_RANGE; returns {"bytes_min": ...}."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        inputs = call_with_size(reference.get_inputs, params)
        model = candidate.ModelNew(*call_with_size(reference.get_init_inputs, params))
    for _ in range(WARMUP_CALLS):
        model(*inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    output = model(*inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    state = [*model.parameters(), *model.buffers()]
    return {"bytes_min": tensor_bytes(inputs) + tensor_bytes(state) + tensor_bytes(output)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.profiler.launch", description=__doc__)
    parser.add_argument("--problem", required=True, help="KernelBench-format problem file")
    parser.add_argument("--candidate", required=True, help="candidate file defining ModelNew")
    parser.add_argument("--size", required=True, help="size label of the problem")
    parser.add_argument("--facts", help="write {'bytes_min': ...} to this JSON file")
    args = parser.parse_args(argv)
    try:
        reference, candidate, params = prepare(args.problem, args.candidate, args.size)
    except ProblemError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA GPU: the profiler launcher needs one", file=sys.stderr)
        return 2
    facts = run_in_range(reference, candidate, params)
    if args.facts:
        Path(args.facts).write_text(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
