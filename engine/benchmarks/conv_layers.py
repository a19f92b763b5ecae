"""Each convolution of a KernelBench file, launched by the kernel library's conv kernel
(hints/model_kernels/conv.py) on the input it gets inside the Model, against PyTorch's
convolution in float64: which layer of a model that fails the gate on a GPU is wrong.

    python -m engine.benchmarks.conv_layers FILE.py [--device cuda] [--batch N]

One line per convolution, tile plan and precision: its shape, the kernel's normalized error (largest
absolute error over the reference's largest magnitude) and PyTorch's own fp32 error."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn as nn

from engine.problems.loader import import_module_from
from hints.model_kernels import conv


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="conv_layers", description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=None, help="cut the batch to this many")
    args = parser.parse_args(argv)
    module = import_module_from(Path(args.file), "problem")
    torch.manual_seed(0)
    with torch.device(args.device):
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
    if args.batch:
        inputs = [x[: args.batch] if isinstance(x, torch.Tensor) else x for x in inputs]
    settings = conv.KB_TILES, conv.KB_CONV_PRECISION
    try:
        for name, layer, x in conv_inputs(model, inputs):
            check_layer(name, layer, x)
    finally:
        conv.KB_TILES, conv.KB_CONV_PRECISION = settings
    return 0


def check_layer(name: str, layer: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        ref = layer.double()(x.double())
        layer.float()
        torch_error = error(layer(x), ref)
        for tiles in ("small", "base", "large"):
            for precision in ("tf32", "tf32x3", "ieee"):
                conv.KB_TILES, conv.KB_CONV_PRECISION = tiles, precision
                ours = error(conv.kb_conv_fused(x, layer), ref)
                print(f"{name}: {type(layer).__name__} {tuple(layer.weight.shape)} on "
                      f"{tuple(x.shape)} {list(x.stride())}, {tiles} {precision}: error "
                      f"{ours:.3g} (PyTorch fp32 {torch_error:.3g})", flush=True)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
