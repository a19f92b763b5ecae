"""The operand-layout benchmark, run on the cpu interpreter at tiny sizes: every variant it times
on the H200 (B N-major and K-major in TF32 and tf32x3; the tap GEMM from NCDHW and channels-last)
runs and computes the reference."""

import json
import subprocess
import sys

import pytest


@pytest.mark.slow  # about 30 s on two cores
def test_every_layout_variant_runs_and_computes_the_reference():
    done = subprocess.run(
        [sys.executable, "-m", "engine.benchmarks.operand_layouts", "--device", "cpu",
         "--convs", "1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    variants = {(row["case"].split()[0], row["variant"]) for row in rows}
    assert variants == {
        ("matmul", "eager"),
        *(("matmul", f"{p}, B {m}-major") for p in ("tf32", "tf32x3") for m in "NK"),
        ("57_conv_transposed_2D__square_input__square_kernel", "eager"),
        ("57_conv_transposed_2D__square_input__square_kernel", "conv.tap_gemm"),
        ("57_conv_transposed_2D__square_input__square_kernel", "conv.tap_gemm_channels_last"),
    }
    assert all(row["max_error"] < 1e-4 for row in rows if "max_error" in row)
