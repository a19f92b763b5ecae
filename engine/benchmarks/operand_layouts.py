"""Operand layouts on tensor cores, measured in one process against eager (triton's do_bench
medians): the matmul family's tiled kernel with an N-major against a K-major B (TF32 and
tf32x3), and the conv family's tap GEMM reading NCDHW against channels-last copies (TF32), or
its implicit GEMM where few input channels call for it, on the KernelBench sample's files.

    python -m engine.benchmarks.operand_layouts --device cuda
    python -m engine.benchmarks.operand_layouts --device cpu   # the interpreter, tiny sizes

On cpu the times mean nothing; the run checks that every variant computes the reference."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

SAMPLE = Path(__file__).parents[2] / "tests" / "problems_kernelbench" / "sample"
MATMUL = SAMPLE / "level1" / "1_Square_matrix_multiplication_.py"
CONVS = [
    SAMPLE / "level1" / "57_conv_transposed_2D__square_input__square_kernel.py",
    SAMPLE / "level2" / "1_Conv2D_ReLU_BiasAdd.py",
    SAMPLE / "level1" / "74_conv_transposed_1D_dilated.py",
    SAMPLE / "level2" / "54_Conv2d_Multiply_LeakyReLU_GELU.py",
    SAMPLE / "level1" / "70_conv_transposed_3D__asymmetric_input__square_kernel.py",
    SAMPLE / "level1" / "61_conv_transposed_3D__square_input__square_kernel.py",
    SAMPLE / "level2" / "2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py",
    next(SAMPLE.glob("level1/79_conv_transposed_1D_*.py")),  # its name is 87 characters
    SAMPLE / "level1" / "50_conv_standard_2D__square_input__square_kernel.py",  # implicit GEMM
    SAMPLE / "level1" / "66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py",
]
# The conv family's GEMM strategies; a file is timed with those that apply to it.
CONV_GEMMS = ("conv.tap_gemm", "conv.tap_gemm_channels_last", "conv.implicit_gemm")
TILES = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8,
         "num_stages": 3}  # fmt: skip


def timed(fn, device: str) -> float:
    """Milliseconds a call: do_bench's median on cuda, the median of three calls on cpu."""
    if device == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, warmup=50, rep=300, return_mode="median")
    times = []
    for _ in range(3):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def rendered(strategy, match, params: dict):
    """The candidate module `strategy` writes for `match` at `params`."""
    from engine.problems.loader import import_module_from

    path = Path(tempfile.mkdtemp()) / "candidate.py"
    path.write_text(strategy.render(match, params))
    return import_module_from(path, "candidate")


def strategy_of(family, name: str):
    return next(s for s in family.strategies if s.name == name)


def matmul_rows(device: str) -> list[dict]:
    """The tiled kernel launched on a and b as they lie (its product() would copy an N-major B
    K-major first), B N-major and K-major."""
    import triton

    from engine.problems import load_problem
    from hints.matmul import FAMILY

    side = 4096 if device == "cuda" else 64
    a, b = (torch.rand(side, side, device=device) for _ in range(2))
    expected = a.double() @ b.double()
    eager = timed(lambda: a @ b, device)
    rows = [{"case": f"matmul {side}^3", "variant": "eager", "ms": eager}]
    match = FAMILY.match(load_problem(str(MATMUL)))
    grid = (triton.cdiv(side, TILES["BLOCK_M"]) * triton.cdiv(side, TILES["BLOCK_N"]), 1)
    for precision in ("tf32", "tf32x3"):
        module = rendered(strategy_of(FAMILY, "matmul.tiled_grouped"), match,
                          {**TILES, "precision": precision})  # fmt: skip
        for layout, b_view in (("B N-major", b), ("B K-major", b.t().contiguous().t())):
            a3, b3 = a.unsqueeze(0), b_view.unsqueeze(0)
            out = torch.empty(1, side, side, device=device)

            def run(a3=a3, b3=b3, out=out, module=module):
                module.matmul_kernel[grid](a3, b3, out, out, side, side, side,
                                           *module.strides(a3, b3, out), HAS_BIAS=False,
                                           **TILES)  # fmt: skip

            ms = timed(run, device)
            error = (out[0].double() - expected).abs().max().item()
            rows.append({"case": f"matmul {side}^3", "variant": f"{precision}, {layout}",
                         "ms": ms, "x_eager": eager / ms, "max_error": error})  # fmt: skip
    return rows


def conv_rows(path: Path, device: str) -> list[dict]:
    """The GEMM strategies that apply (the tap GEMM from NCDHW and from channels-last copies, or
    the implicit GEMM) in TF32 at their default tiles, at the file's own size on cuda and its
    smallest on cpu, with the reference's weights."""
    from engine.problems import load_problem
    from engine.problems.loader import import_module_from
    from engine.runner.calls import call_with_size
    from hints.conv import FAMILY

    problem = load_problem(str(path))
    params = {} if device == "cuda" else problem.smallest.params
    reference = import_module_from(path, "reference")
    init = call_with_size(reference.get_init_inputs, params)
    inputs = [t.to(device) for t in call_with_size(reference.get_inputs, params)]
    model = reference.Model(*init).to(device)
    match = FAMILY.match(problem)
    rows = []
    with torch.no_grad():
        expected = model(*inputs)
        eager = timed(lambda: model(*inputs), device)
        rows.append({"case": path.stem, "variant": "eager", "ms": eager})
        for gemm in (strategy_of(FAMILY, name) for name in CONV_GEMMS):
            if not gemm.applies_to(match):
                continue
            module = rendered(gemm, match, {"precision": "tf32"})
            candidate = module.ModelNew(*init).to(device)
            candidate.load_state_dict(model.state_dict())
            error = (candidate(*inputs) - expected).abs().max().item()
            ms = timed(lambda candidate=candidate: candidate(*inputs), device)
            rows.append({"case": path.stem, "variant": gemm.name, "ms": ms, "x_eager": eager / ms,
                         "max_error": error})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="operand_layouts", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--convs", type=int, default=len(CONVS), help="how many conv files")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    elif not torch.cuda.is_available():
        parser.error("no CUDA device here: use --device cpu for a smoke run on the interpreter")
    rows = matmul_rows(args.device)
    for path in CONVS[: args.convs]:
        rows.extend(conv_rows(path, args.device))
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
