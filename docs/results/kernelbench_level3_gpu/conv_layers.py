"""Each convolution of a KernelBench file, launched by the kernel library's conv kernel
(hints/model_kernels/conv.py) on the input it gets inside the Model, against PyTorch's
convolution in float64: which layer of a model that fails the gate on a GPU is wrong.

    python docs/results/kernelbench_level3_gpu/conv_layers.py FILE.py [--device cuda] [--batch N]

One line per convolution and tile plan: its shape, the kernel's normalized error (largest
absolute error over the reference's largest magnitude) and PyTorch's own fp32 error."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from engine.problems.loader import import_module_from  # noqa: E402
from hints.model_kernels import conv, matmul  # noqa: E402


def conv_inputs(model: nn.Module, inputs: list) -> list[tuple[str, nn.Module, torch.Tensor]]:
    """(name, module, its input) of every Conv*d the Model's forward calls, in call order."""
    seen = []
    hooks = [m.register_forward_pre_hook(lambda m, args, name=name: seen.append(
        (name, m, args[0].detach().clone()))) for name, m in model.named_modules()
        if isinstance(m, nn.modules.conv._ConvNd)]  # fmt: skip
    with torch.no_grad():
        model(*inputs)
    for hook in hooks:
        hook.remove()
    return seen


def error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=None, help="cut the batch to this many")
    args = parser.parse_args()
    module = import_module_from(Path(args.file), "problem")
    torch.manual_seed(0)
    with torch.device(args.device):
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
    if args.batch:
        inputs = [x[: args.batch] if isinstance(x, torch.Tensor) else x for x in inputs]
    for name, layer, x in conv_inputs(model, inputs):
        with torch.no_grad():
            ref = layer.double()(x.double())
            layer.float()
            torch_error = error(layer(x), ref)
            for tiles in ("small", "base", "large"):
                for precision in ("tf32x3", "ieee"):
                    conv.KB_TILES = matmul.KB_TILES = tiles
                    conv.KB_DOT_PRECISION = precision
                    ours = error(conv.kb_conv_fused(x, layer), ref)
                    print(f"{name}: {type(layer).__name__} {tuple(layer.weight.shape)} on "
                          f"{tuple(x.shape)} {list(x.stride())}, {tiles} {precision}: error "
                          f"{ours:.3g} (PyTorch fp32 {torch_error:.3g})", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
