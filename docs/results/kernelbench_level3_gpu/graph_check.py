"""Level 3 files' first offline proposal with its forward as written ("graphs" off) and replayed as
a CUDA graph ("on", hints/model_kernels/graphs.py), beside the Model in eager PyTorch: each one's
normalized error against the Model in float64 on three input sets of new contents at new
addresses (with "on", the first call captures the graph and every call replays it; before
session 54's change, the first ran as written and the second captured), and the median time of
one call (L2 flushed, synchronized, as the judge's bracket times it).

    python docs/results/kernelbench_level3_gpu/graph_check.py FILE.py [FILE.py ...]

KB_DEVICE=cpu (with TRITON_INTERPRET=1) runs it in the interpreter, where forward always runs as
written."""

import os
import random
import statistics
import sys
from pathlib import Path

import torch

from engine.benchmarks.conv_layers import error
from engine.gate.correctness import reference_float64
from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems import load_problem
from engine.runner.profile_launch import import_file
from engine.runner.timer import Bracket
from hints import model

CALLS = 30
DEVICE = os.environ.get("KB_DEVICE", "cuda")


def load_candidate(name: str, source: str):
    path = Path(f"/tmp/graph_check_{name}.py")  # Triton reads a kernel's source from its file
    path.write_text(source)
    return import_file(str(path), name)


def proposal(problem, graphs: str) -> str:
    """The first proposal, rendered again with `graphs`."""
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    first = OfflineGenerator(problem, DEVICE).propose(request).proposals[0]
    found = model.match(problem)
    return model.REWRITE.for_match(found).render(found, {**first.params, "graphs": graphs})


def median_ms(bracket: Bracket, model, inputs) -> float:
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        return statistics.median(bracket.rep(model, inputs)[0] for _ in range(CALLS))


def check(path: str, bracket: Bracket) -> None:
    problem = load_problem(path)
    reference = import_file(path, "reference")
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = reference.Model(*reference.get_init_inputs()).eval()
        times = {"eager": median_ms(bracket, model, reference.get_inputs())}
    for graphs in ("off", "on"):
        candidate = load_candidate(f"candidate_{graphs}", proposal(problem, graphs))
        with torch.device(DEVICE):
            new = candidate.ModelNew(*reference.get_init_inputs()).eval()
        new.load_state_dict(model.state_dict())
        errors = []
        for seed in (1, 2, 3):
            torch.manual_seed(seed)
            with torch.device(DEVICE):
                inputs = reference.get_inputs()
            with torch.no_grad():
                ours = new(*inputs)
                theirs = reference_float64(model, inputs)
            ours = ours if isinstance(ours, (tuple, list)) else (ours,)
            errors.append(max(error(o, t) for o, t in zip(ours, theirs, strict=False)))
        times[graphs] = median_ms(bracket, new, inputs)
        print(f"{Path(path).stem} graphs {graphs}: errors {', '.join(f'{e:.3g}' for e in errors)}; "
              f"{times[graphs]:.3f} ms a call", flush=True)  # fmt: skip
        del new
    eager = times["eager"]
    print(f"{Path(path).stem}: eager {eager:.3f} ms; x eager off {eager / times['off']:.2f}, "
          f"on {eager / times['on']:.2f}", flush=True)  # fmt: skip


def main(paths: list[str]) -> None:
    bracket = Bracket(DEVICE)
    for path in paths:
        try:
            check(path, bracket)
        except Exception as exc:  # one file's failure says so and the others go on
            print(f"{Path(path).stem}: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
