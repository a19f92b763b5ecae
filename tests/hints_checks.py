"""Shared checks for the hint-family tests: render a strategy and run the candidate on the CPU
interpreter against the float64 reference (the policy gate's static rules included)."""

from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path

import torch

from engine.gate.static import static_check
from engine.problems import load_problem
from engine.problems.loader import call_with_size, import_module_from

# Triton reads this when @triton.jit is applied, so it must be set before a candidate loads.
os.environ["TRITON_INTERPRET"] = "1"

UNSEEN_MM = Path(__file__).parent / "problems_unseen_mm"


def load_source(source: str, tmp_path: Path):
    path = tmp_path / f"candidate_{uuid.uuid4().hex[:8]}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@torch.no_grad()
def candidate_error(problem, source: str, tmp_path: Path, params: dict | None = None) -> float:
    """Worst error, relative to the largest output, of the candidate against the float64
    reference on the problem's smallest size (or on size `params`), after the gate's static
    rules accept its source. When engine.gate.check_candidate lands, the default-size path
    becomes `result = check_candidate(problem, source, backend="cpu")`, asserting
    `result.passed` and returning `result.error`."""
    rejection = static_check(problem, source)
    assert rejection is None, f"{rejection.reason}: {rejection.message}"
    params = problem.smallest.params if params is None else params
    reference = import_module_from(problem.path, "reference")
    candidate = load_source(source, tmp_path)
    torch.manual_seed(0)
    init = call_with_size(reference.get_init_inputs, params)
    model = reference.Model(*init)
    new = candidate.ModelNew(*init)
    new.load_state_dict(model.state_dict())
    inputs = call_with_size(reference.get_inputs, params)
    out = new(*inputs)
    expected = model.double()(*[t.double() for t in inputs])
    assert out.shape == expected.shape and out.dtype == inputs[0].dtype
    scale = expected.abs().max().clamp_min(1e-6)
    return float((out.double() - expected).abs().max() / scale)


def problem(spec: str):
    return load_problem(str(UNSEEN_MM / spec) if spec.endswith(".py") else spec)
