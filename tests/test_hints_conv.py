"""The conv hint family: matching from traced calls, and every strategy's candidates correct on
the CPU interpreter for the built-in grouped conv (grouped and depthwise sizes) and unseen files."""

import os
import re
import subprocess
import sys

import pytest
import torch
from hints_checks import candidate_error, problem, strategy
from sm90 import compiled_for_sm90

from engine.gate.torch_use import check_torch_use
from engine.problems import builtin_names
from engine.problems.loader import import_module_from
from engine.runner.guards import guarded_call
from hints import match_problem
from hints.conv import FAMILY

STRICT = 1e-5  # fp32 accumulation of at most 288 products: observed errors are ~1e-7
DEPTHWISE_SIZE = dict(n=2, c=4, hw=7, groups=4)  # groupconv's ladder has a depthwise size too


def test_matches_only_the_groupconv_problem_among_builtins():
    matched = {name for name in builtin_names() if FAMILY.match(problem(name))}
    assert matched == {"groupconv"}


def test_groupconv_facts_come_from_the_trace():
    match = FAMILY.match(problem("groupconv"))
    (geometry,) = match.facts["geometry"]
    assert geometry["padding"] == (0, 1, 1) and geometry["stride"] == (1, 1, 1)
    assert not geometry["transposed"]
    assert match.facts["forward_body"] == "conv(x, self.conv.weight, None, 0)"
    assert ["full", 0, 32, 128, 1, 112, 112, 128, 1, 1, 1, 3, 3] in match.facts["sizes"]
    assert "conv" in [family.name for family, _ in match_problem(problem("groupconv"))]


def test_strategies_that_apply_to_groupconv():
    match = FAMILY.match(problem("groupconv"))
    applicable = {s.name for s in FAMILY.strategies if s.applies_to(match)}
    # 8 channels per group at most: too few for tl.dot's 16-wide tiles.
    assert applicable == {"conv.direct_tiled", "conv.depthwise_stencil"}


POINTS = [
    ("conv.direct_tiled", {}),
    ("conv.direct_tiled", {"BLOCK_P": 64, "BLOCK_CO": 4, "num_warps": 2}),
    ("conv.depthwise_stencil", {}),
    ("conv.depthwise_stencil", {"BLOCK_H": 4, "BLOCK_W": 16, "BLOCK_P": 64}),
]


@pytest.mark.parametrize(("name", "params"), POINTS)
@pytest.mark.parametrize("size", [None, DEPTHWISE_SIZE], ids=["tiny", "depthwise"])
def test_strategy_points_are_correct_on_grouped_and_depthwise_sizes(name, params, size, tmp_path):
    groupconv = problem("groupconv")
    source = strategy(FAMILY, name).render(FAMILY.match(groupconv), params)
    assert candidate_error(groupconv, source, tmp_path, size) < STRICT


@pytest.mark.parametrize(
    "params",
    [{}, {"GEMM_BLOCK_P": 16 * 2, "GEMM_BLOCK_CO": 16, "BLOCK_K": 64}, {"precision": "tf32x3"}],
)
def test_implicit_gemm_points_on_wide_groups(params, tmp_path):
    wide = problem("grouped_conv_wide_relu.py")
    source = strategy(FAMILY, "conv.implicit_gemm").render(FAMILY.match(wide), params)
    assert candidate_error(wide, source, tmp_path) < STRICT


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(
    "params",
    [{}, {"GEMM_BLOCK_P": 32, "GEMM_BLOCK_CO": 16, "BLOCK_K": 16}, {"precision": "tf32x3"}],
)
@pytest.mark.parametrize(
    "spec",
    [
        "grouped_conv_wide_relu.py",
        "conv_transpose1d_wide_dilated.py",
        "conv_transpose2d_wide_stride2.py",
        "conv_transpose3d_wide_stride2.py",
    ],
)
@pytest.mark.parametrize("name", ["conv.tap_gemm", "conv.tap_gemm_channels_last"])
def test_tap_gemm_points_on_wide_channels(name, spec, params, tmp_path):
    """Tap by tap, in plain (dilated, grouped, with an epilogue) and transposed convolutions:
    in one loop where the stride is one, by phases of the stride (padding, output padding and
    dilation in two and three dims) where it is not; reading the input where it lies (NCDHW) or
    from channels-last copies of it and of the weights."""
    wide = problem(spec)
    source = strategy(FAMILY, name).render(FAMILY.match(wide), params)
    assert candidate_error(wide, source, tmp_path) < STRICT


@pytest.mark.parametrize("name", ["conv.tap_gemm", "conv.tap_gemm_channels_last",
                                  "conv.implicit_gemm"])  # fmt: skip
def test_tf32_operands_are_rounded_to_nearest_as_they_are_copied(name, tmp_path):
    """tl.dot reads fp32 as TF32 by dropping 13 bits; the GEMMs' operands are rounded first, once,
    as they are copied for the kernel, so the error is of cuDNN's kind: each value becomes its
    nearest TF32 value, ties away from zero. The input keeps its layout or goes channels-last."""
    wide = problem("grouped_conv_wide_relu.py")
    source = strategy(FAMILY, name).render(FAMILY.match(wide), {"precision": "tf32"})
    module = tmp_path / "candidate.py"
    module.write_text(source)
    script = f"""
import importlib.util
import torch
spec = importlib.util.spec_from_file_location("candidate", {str(module)!r})
candidate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(candidate)
assert candidate.ROUND_TO_TF32

def nearest(x):  # the nearest multiple of TF32's last place, in float64, ties away from 0
    x64 = x.double()
    ulp = 2.0 ** (torch.floor(torch.log2(x64.abs().clamp_min(1e-300))) - 10)
    return torch.sign(x64) * torch.floor(x64.abs() / ulp + 0.5) * ulp

x = torch.randn(2, 40, 3, 5, 7) * 10.0 ** torch.randint(-20, 20, (2, 40, 3, 5, 7))
ties = [1 + 2 ** -11, -(1 + 2 ** -11), 1 + 3 * 2 ** -11]  # halfway: away from zero
x.view(-1)[:8] = torch.tensor([*ties, 0.0, 1.0, 2 ** -12, 3.0, -7.5])
w = x[:1, :, :1].clone()  # [G * COUT_G, CIN_G, KD, KH, KW]
args = {{"G": 1, "CIN_G": 40, "COUT_G": 1, "KD": 1, "KH": 5, "KW": 7, "TRANSPOSED": False}}
operands = getattr(candidate, "tap_operands", None) or candidate.gemm_operands
x_in, w_in, _ = operands(x, w, args)
channels_last = getattr(candidate, "CHANNELS_LAST", False)
assert torch.equal(x_in.double(), nearest(x).permute(0, 2, 3, 4, 1) if channels_last
                   else nearest(x))
assert torch.equal(w_in.double().flatten().sort().values, nearest(w).flatten().sort().values)
print("ok")
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("name", ["conv.tap_gemm", "conv.tap_gemm_channels_last",
                                  "conv.implicit_gemm"])  # fmt: skip
def test_tf32_gemms_round_in_triton_so_the_gate_admits_them(name, tmp_path):
    """The rounded copies are made by a Triton kernel, weights too: torch arithmetic in forward
    (rounding by integer add and mask) is refused by the gate as torch_compute (it was, on the
    H200, for every tf32 candidate of a bench before this)."""
    wide = problem("grouped_conv_wide_relu.py")
    path = tmp_path / "candidate.py"
    path.write_text(strategy(FAMILY, name).render(FAMILY.match(wide), {"precision": "tf32"}))
    candidate = import_module_from(path, "candidate")
    model = candidate.ModelNew(64, 64, 2)  # 32 channels a group: the GEMM, not the fallback
    out, ops = guarded_call(model, [torch.randn(1, 64, 5, 5)], "nan")
    assert out.isfinite().all()
    assert "fill_" in ops  # the guard saw forward's operators
    check_torch_use(ops, replaced=frozenset({"conv2d", "relu"}), allowed=frozenset())
    assert candidate.ROUND_TO_TF32


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("depthwise_conv5x5_stride2.py", {"conv.direct_tiled", "conv.depthwise_stencil"}),
        ("grouped_conv_wide_relu.py",
         {"conv.direct_tiled", "conv.tap_gemm", "conv.tap_gemm_channels_last"}),
    ],
)  # fmt: skip
def test_unseen_convolutions_get_correct_candidates(spec, expected, tmp_path):
    unseen = problem(spec)
    match = FAMILY.match(unseen)
    assert match is not None
    applicable = [s for s in FAMILY.strategies if s.applies_to(match)]
    assert {s.name for s in applicable} == expected
    for s in applicable:
        assert candidate_error(unseen, s.render(match, {"precision": "tf32x3"}), tmp_path) < STRICT


def test_depthwise_stride_two_facts():
    facts = FAMILY.match(problem("depthwise_conv5x5_stride2.py")).facts
    (geometry,) = facts["geometry"]
    assert geometry["stride"] == (1, 2, 2) and geometry["padding"] == (0, 2, 2)
    assert facts["sizes"][0][8:] == [1, 1, 1, 5, 5]
    assert facts["forward_body"].endswith("self.conv2d.bias, 0)")


def warp_lanes(ttgir: str, shape: str) -> list[int]:
    """threadsPerWarp of the layout of the first global-to-shared copy of a `shape` tile."""
    copy = re.search(
        rf"async_copy_global_to_local .* : tensor<{shape}x!tt.ptr<f32>, #(\w+)>", ttgir
    )
    layout = re.search(rf"#{copy.group(1)} = .*threadsPerWarp = \[(\d+), (\d+)\]", ttgir)
    return [int(n) for n in layout.groups()]


def compiled_gemm_ttgir(name: str, kernel: str, tmp_path) -> str:
    """TTGIR (sm_90) of a conv GEMM strategy's kernel at 128 positions x 64 channels x 32, for a
    3x3 convolution."""
    wide = problem("grouped_conv_wide_relu.py")
    params = {"precision": "tf32", "GEMM_BLOCK_P": 128, "GEMM_BLOCK_CO": 64, "BLOCK_K": 32}
    path = tmp_path / "candidate.py"
    path.write_text(strategy(FAMILY, name).render(FAMILY.match(wide), params))
    ints = "C D H W CO OD OH OW CIN_G COUT_G G W_CO W_CI".split()
    constants = {"KD": 1, "KH": 3, "KW": 3, "STRIDE_D": 1, "STRIDE_H": 1, "STRIDE_W": 1,
                 "PAD_D": 0, "PAD_H": 1, "PAD_W": 1, "DIL_D": 1, "DIL_H": 1, "DIL_W": 1,
                 "TRANSPOSED": False, "HAS_BIAS": False, "EPILOGUE": False, "BLOCK_P": 128,
                 "BLOCK_CO": 64, "BLOCK_K": 32}  # fmt: skip
    if kernel == "conv_tap_gemm_kernel":
        ints.append("W_TAP")
        constants["CHANNELS_LAST"] = name.endswith("channels_last")
    signature = {**dict.fromkeys(("x_ptr", "w_ptr", "bias_ptr", "out_ptr"), "*fp32"),
                 **dict.fromkeys(ints, "i32"), **dict.fromkeys(constants, "constexpr")}  # fmt: skip
    return compiled_for_sm90(path, kernel, signature, constants, num_warps=4)["ttgir"]


@pytest.mark.parametrize("name, kernel", [("conv.tap_gemm", "conv_tap_gemm_kernel"),
                                          ("conv.tap_gemm_channels_last", "conv_tap_gemm_kernel"),
                                          ("conv.implicit_gemm", "conv_gemm_kernel")])  # fmt: skip
def test_input_tiles_are_k_major_and_stores_run_along_positions_on_the_h200(name, kernel, tmp_path):
    """Compiled for sm_90: a GEMM's input tile is [positions x reduction], K-major as Hopper's
    TF32 products read it (loaded as [channels x positions] and transposed, b50a93d, the tap
    GEMM ran 2 to 5 times slower on the H200); the output is stored along positions, a warp's
    threads on neighbours in memory (a channel a thread would be D*H*W apart)."""
    ttgir = compiled_gemm_ttgir(name, kernel, tmp_path)
    lanes = warp_lanes(ttgir, "128x32")  # [positions x reduction]
    assert "tensor<32x128x!tt.ptr<f32>" not in ttgir  # no [reduction x positions] input tile
    if name.endswith("channels_last"):
        assert lanes[1] > 1  # the channels are contiguous: a warp's threads along them
    store = re.search(r"tt.store .* : tensor<(\d+)x(\d+)x!tt.ptr<f32>", ttgir)
    assert store.groups() == ("64", "128")  # [output channels x positions]
