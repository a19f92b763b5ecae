"""A level 3 file's first offline proposal on the GPU against its Model in float64, both built as
the judge builds them (seeded, eval mode): each convolution launch of the kernel library (its
epilogue included) against PyTorch's, each module by name (forward hooks, first call) and the
output, as normalized errors (largest absolute error over the reference's largest magnitude).

    python docs/results/kernelbench_level3_gpu/module_check.py FILE.py [BATCH]

KB_DEVICE=cpu (with TRITON_INTERPRET=1) runs it in the interpreter."""

import importlib.util
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.benchmarks.conv_layers import error
from engine.gate.correctness import reference_float64
from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems import load_problem

ACTIVATIONS = {
    "none": lambda y: y, "relu": torch.relu, "relu6": lambda y: y.clamp(0, 6),
    "sigmoid": torch.sigmoid, "silu": F.silu, "gelu": F.gelu, "tanh": torch.tanh,
}  # fmt: skip


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checked_conv_launches(candidate) -> None:
    """Each 2-D convolution the candidate's library launches, checked as it runs."""
    launch, count = candidate._conv_launch, [0]

    def checked(x, w, b, nd, stride, padding, dilation, groups, output_padding,
                epilogue=(None, None, None, "none")):  # fmt: skip
        out = launch(x, w, b, nd, stride, padding, dilation, groups, output_padding, epilogue)
        if output_padding is None and nd == 2:
            scale, shift, residual, act = epilogue
            y = F.conv2d(x.double(), w.double(), None if b is None else b.double(), stride,
                         padding, dilation, groups)  # fmt: skip
            y = y if scale is None else y * scale.double()[:, None, None]
            y = y if shift is None else y + shift.double()[:, None, None]
            y = ACTIVATIONS[act](y if residual is None else y + residual.double())
            count[0] += 1
            print(f"conv launch {count[0]}: w {tuple(w.shape)} x {tuple(x.shape)} groups {groups}, "
                  f"{act}: error {error(out, y):.3g}", flush=True)  # fmt: skip
        return out

    candidate._conv_launch = checked


def record_modules(model, seen: dict, order: list) -> None:
    for name, module in model.named_modules():

        def hook(_, args, out, name=name):
            if name not in seen and isinstance(out, torch.Tensor):
                seen[name] = out.detach().double().clone()
                order.append(name)

        module.register_forward_hook(hook)


def main(path: str, batch: int | None) -> None:
    problem = load_problem(path)
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    source = OfflineGenerator(problem).propose(request).proposals[0].source
    Path("/tmp/module_check_candidate.py").write_text(source)
    candidate = load("candidate", Path("/tmp/module_check_candidate.py"))
    reference = load("reference", Path(path))
    if hasattr(candidate, "_conv_launch"):
        checked_conv_launches(candidate)
    torch.manual_seed(0)
    with torch.device(os.environ.get("KB_DEVICE", "cuda")):
        model = reference.Model(*reference.get_init_inputs()).eval()
        new = candidate.ModelNew(*reference.get_init_inputs()).eval()
        inputs = reference.get_inputs()
    new.load_state_dict(model.state_dict())
    if batch:
        inputs = [x[:batch] if isinstance(x, torch.Tensor) else x for x in inputs]
    ours, theirs, order = {}, {}, []
    record_modules(new, ours, order)
    record_modules(model, theirs, [])
    with torch.no_grad():
        torch.manual_seed(1)
        start = time.time()
        outputs = new(*inputs)
        seconds = time.time() - start
        torch.manual_seed(1)
        references = reference_float64(model, inputs)
    for name in order:
        if name in theirs and ours[name].shape == theirs[name].shape:
            print(f"{name or '(model)'}: {tuple(ours[name].shape)} error "
                  f"{error(ours[name], theirs[name]):.3g}", flush=True)  # fmt: skip
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for k, (ours_k, ref_k) in enumerate(zip(outputs, references, strict=False)):
        print(f"{Path(path).name} output {k} {tuple(ours_k.shape)}: error "
              f"{error(ours_k, ref_k):.3g} (first call {seconds:.2f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
