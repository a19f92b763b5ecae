"""The 3x3 convolutions that summed wrong on an H100 (8_ResNetBasicBlock's conv1, reduction 27,
and conv2, 576; 17_SqueezeNetFireModule's expand3x3, 54) through builds of the library's conv
kernel: the tree's ("fixed": masked-off lanes load at offset 0), the one before it ("orig":
offsets as computed) and that one at num_stages=1 ("stages1"); at each tile plan and precision,
the normalized error against float64 and the time of one call.

    python docs/results/kernelbench_level3_gpu/conv_variants.py [fixed] [orig] [stages1]"""

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
LAUNCH = "BLOCK_CO=block_co, BLOCK_K=block_k, num_warps=warps,"
CASES = [("8.conv1", 3, 224, 8), ("17.expand3x3", 6, 256, 8), ("8.conv2", 64, 224, 4)]


def builds() -> dict[str, str]:
    fixed = SOURCE.read_text()
    loads = fixed[fixed.index("        # Masked-off lanes load") : fixed.index("        if DOT:\n")]
    orig = fixed.replace(loads, ORIGINAL_LOADS)
    stages1 = orig.replace(LAUNCH, LAUNCH + " num_stages=1,")
    assert orig != fixed and stages1 != orig
    return {"fixed": fixed, "orig": orig, "stages1": stages1}


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
                    for precision in ("tf32x3", "ieee"):
                        conv.KB_TILES, conv.KB_DOT_PRECISION = tiles, precision
                        out = conv.kb_conv_fused(x, layer)
                        ms = triton.testing.do_bench(partial(conv.kb_conv_fused, x, layer), rep=20)
                        print(f"{label} {name} {tiles} {precision}: error "
                              f"{error(out, ref):.3g}, {ms:.3f} ms", flush=True)  # fmt: skip
            print(f"{label} PyTorch: {triton.testing.do_bench(partial(layer, x), rep=20):.3f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
