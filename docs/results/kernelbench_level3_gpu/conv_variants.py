"""The 3x3 convolutions that summed wrong on an H100 (8_ResNetBasicBlock's conv1, reduction 27,
and conv2, 576; 17_SqueezeNetFireModule's expand3x3, 54) through builds of the library's conv
kernel: the tree's ("tree": masked-off lanes load at offset 0, products of several taps
unpipelined), that one pipelined as Triton's default ("pipelined", session 51's "fixed"), and
that one with the offsets as computed ("orig"); at each tile plan and precision, the normalized
error against float64 and the time of one call (tf32, tf32x3 and ieee), beside PyTorch's.

    python docs/results/kernelbench_level3_gpu/conv_variants.py [tree] [pipelined] [orig]"""

import importlib.util
import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
import triton.testing

from engine.benchmarks.conv_layers import error

SOURCE = Path(__file__).resolve().parents[3] / "hints" / "model_kernels" / "conv.py"
ORIGINAL_LOADS = """        a = tl.load(
            x_base + ci[None, :] * sxc + idd * sxd + ih * sxh + iw * sxw, mask=a_ok, other=0.0
        )
        w_tap = ci * swi + kd * swd + kh * swh + kw * sww
        b = tl.load(
            w_base + w_tap[:, None] + co[None, :] * swo,
            mask=k_ok[:, None] & co_ok[None, :],
            other=0.0,
        )
"""
STAGES = "stages = 1 if taps[0] * taps[1] * taps[2] > 1 else 3\n"
CASES = [("8.conv1", 3, 224, 8), ("17.expand3x3", 6, 256, 8), ("8.conv2", 64, 224, 4)]


def builds() -> dict[str, str]:
    tree = SOURCE.read_text()
    pipelined = tree.replace(STAGES, "stages = 3\n")
    loads = tree[tree.index("        # Masked-off lanes load") : tree.index("        if DOT:\n")]
    orig = pipelined.replace(loads, ORIGINAL_LOADS)
    assert tree != pipelined != orig
    return {"tree": tree, "pipelined": pipelined, "orig": orig}


def load(name: str, text: str):
    path = Path(f"/tmp/conv_{name}.py")
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"conv_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(names: list[str]) -> None:
    texts = builds()
    variants = {name: load(name, texts[name]) for name in names or texts}
    torch.manual_seed(0)
    for label, cin, size, batch in CASES:
        x = torch.randn(batch, cin, size, size, device="cuda")
        layer = torch.nn.Conv2d(cin, 64, 3, padding=1, bias=False).cuda()
        with torch.no_grad():
            ref = F.conv2d(x.double(), layer.weight.double(), None, 1, 1)
            for name, conv in variants.items():
                for tiles in ("small", "base", "large"):
                    for precision in ("tf32", "tf32x3", "ieee"):
                        conv.KB_TILES, conv.KB_CONV_PRECISION = tiles, precision
                        out = conv.kb_conv_fused(x, layer)
                        ms = triton.testing.do_bench(partial(conv.kb_conv_fused, x, layer), rep=20)
                        print(f"{label} {name} {tiles} {precision}: error "
                              f"{error(out, ref):.3g}, {ms:.3f} ms", flush=True)  # fmt: skip
            torch_error = error(layer(x), ref)  # cuDNN's TF32 at PyTorch's defaults
            ms = triton.testing.do_bench(partial(layer, x), rep=20)
            print(f"{label} PyTorch: error {torch_error:.3g}, {ms:.3f} ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
