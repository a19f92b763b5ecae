"""The matmul hint family: matching from traced calls, and every strategy's candidates correct
on the CPU interpreter for the built-in problem and for unseen KernelBench files."""

import importlib.util
import re

import pytest
import torch
from hints_checks import candidate_error, problem, strategy
from sm90 import compiled_for_sm90

from engine.problems import builtin_names
from hints import match_problem
from hints.matmul import FAMILY

STRICT = 1e-5  # fp32 accumulation of K <= 70 products: observed errors are ~1e-7
TF32 = 5e-3  # tf32 rounds operands to 10 mantissa bits


def test_matches_only_the_linear_problem_among_builtins():
    matched = {name for name in builtin_names() if FAMILY.match(problem(name))}
    assert matched == {"linear_relu_div"}


def test_linear_relu_div_facts_come_from_the_trace():
    facts = FAMILY.match(problem("linear_relu_div")).facts
    assert facts["op"] == "linear"
    assert facts["epilogue_statements"].split() == "v4 = tl.maximum(acc, 0.0) v5 = v4 / 2.0".split()
    assert (facts["epilogue"], facts["epilogue_operands"]) == ("v5", ())
    assert "self.linear.weight.t()" in facts["forward_body"]
    assert "self.linear.bias" in facts["forward_body"]


def test_registered_in_the_hint_library():
    families = [family.name for family, _ in match_problem(problem("linear_relu_div"))]
    assert "matmul" in families


def test_split_k_applies_to_the_small_m_ladder_only():
    assert strategy(FAMILY, "matmul.split_k").applies_to(FAMILY.match(problem("linear_relu_div")))
    assert not strategy(FAMILY, "matmul.split_k").applies_to(FAMILY.match(problem("gemm_gelu.py")))


POINTS = [
    ("matmul.tiled_grouped", {}),
    ("matmul.tiled_grouped", {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 1}),
    ("matmul.tiled_grouped", {"precision": "tf32x3"}),
    ("matmul.split_k", {}),
    ("matmul.split_k", {"precision": "tf32x3"}),
    ("matmul.split_k", {"SPLIT_K": 8, "BLOCK_K": 16, "BLOCK_M": 32, "BLOCK_N": 32}),
    ("matmul.persistent", {}),
    ("matmul.persistent", {"BLOCK_M": 32, "BLOCK_N": 32, "GROUP_M": 4}),
    ("matmul.persistent", {"precision": "tf32x3"}),
]


@pytest.mark.parametrize(("name", "params"), POINTS)
def test_strategy_points_are_correct_on_the_tiny_size(name, params, tmp_path):
    linear = problem("linear_relu_div")
    source = strategy(FAMILY, name).render(FAMILY.match(linear), params)
    assert candidate_error(linear, source, tmp_path) < STRICT


def test_tf32_candidate_names_its_precision_and_stays_within_tf32_error(tmp_path):
    linear = problem("linear_relu_div")
    source = strategy(FAMILY, "matmul.tiled_grouped").render(
        FAMILY.match(linear), {"precision": "tf32"}
    )
    assert 'input_precision="tf32"' in source
    assert candidate_error(linear, source, tmp_path) < TF32


def test_one_candidate_serves_every_size_shape(tmp_path):
    linear = problem("linear_relu_div")
    source = strategy(FAMILY, "matmul.split_k").render(FAMILY.match(linear), {"BLOCK_M": 32})
    other = dict(batch=5, in_features=100, out_features=33)
    assert candidate_error(linear, source, tmp_path, other) < STRICT


@pytest.mark.parametrize(
    "spec", ["gemm_gelu.py", "gemm_sigmoid_scale.py", "matmul_scale.py", "bmm_relu.py"]
)
def test_unseen_products_get_correct_candidates(spec, tmp_path):
    unseen = problem(spec)
    match = FAMILY.match(unseen)
    assert match is not None
    applicable = [s for s in FAMILY.strategies if s.applies_to(match)]
    assert applicable
    for s in applicable:
        assert candidate_error(unseen, s.render(match, {"BLOCK_K": 16}), tmp_path) < STRICT


def test_epilogue_it_cannot_express_means_no_match(tmp_path):
    path = tmp_path / "gemm_softmax.py"
    path.write_text(
        (problem("gemm_gelu.py").path.read_text()).replace("F.gelu(x)", "torch.softmax(x, dim=1)")
    )
    assert FAMILY.match(problem(str(path))) is None


def tf32x3_candidate(tmp_path):
    """The tiled tf32x3 candidate for the linear problem, as a file and as an imported module."""
    linear = problem("linear_relu_div")
    path = tmp_path / "candidate.py"
    path.write_text(strategy(FAMILY, "matmul.tiled_grouped").render(
        FAMILY.match(linear), {"precision": "tf32x3"}))  # fmt: skip
    spec = importlib.util.spec_from_file_location("tf32x3_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_tf32x3_splits_operands_into_a_tf32_part_and_an_exact_remainder(tmp_path):
    """hi keeps TF32's 10 mantissa bits (rounded to nearest), hi + lo is the operand exactly,
    lo is at most half a TF32 step; inf stays whole; a transposed operand keeps its layout."""
    _, candidate = tf32x3_candidate(tmp_path)
    x = torch.randn(48, 40) * torch.logspace(-20, 20, 40)
    x[0, 0], x[1, 1] = float("inf"), float("-inf")
    hi, lo = candidate.split_tf32(x)
    finite = x.isfinite()
    assert (hi.view(torch.int32)[finite] & 0x1FFF == 0).all()
    assert torch.equal((hi + lo)[finite], x[finite])
    half_step = hi.abs() * 2.0**-11
    assert (lo.abs()[finite] <= half_step[finite]).all()
    assert hi[0, 0] == float("inf") and hi[1, 1] == float("-inf") and lo[0, 0] == lo[1, 1] == 0
    nearest = (x.double() - hi.double()).abs()
    for step in (-1, 1):  # no other TF32 value is nearer to x
        neighbour = (hi.view(torch.int32) + step * 0x2000).view(torch.float32)
        assert ((x.double() - neighbour.double()).abs()[finite] >= nearest[finite]).all()
    hi_t, lo_t = candidate.split_tf32(x.t())
    assert hi_t.stride() == lo_t.stride() == x.t().stride()
    assert torch.equal(hi_t, hi.t())


def test_tf32x3_runs_three_tf32_products_on_operands_from_shared_memory_on_the_h200(tmp_path):
    """Compiled for sm_90: the K loop issues three TF32 tensor-core products on tiles copied
    straight to shared memory. Triton's own tf32x3 rounds the tiles in registers each step
    (inline cvt.rna), writes them back to shared memory and starts a fresh accumulator."""
    path, _ = tf32x3_candidate(tmp_path)
    axes = {"a": "bmk", "b": "bkn", "c": "bmn"}
    strides = [f"stride_{t}{axis}" for t in "abc" for axis in axes[t]]
    ints = ["M", "N", "K", *strides]
    signature = {**dict.fromkeys(("a_ptr", "b_ptr", "a_lo_ptr", "b_lo_ptr", "bias_ptr", "c_ptr"),
                                 "*fp32"), **dict.fromkeys(ints, "i32")}  # fmt: skip
    constants = {"HAS_BIAS": True, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8,
                 "SPLIT_TF32": True}  # fmt: skip
    signature.update(dict.fromkeys(constants, "constexpr"))
    ttgir = compiled_for_sm90(path, "matmul_kernel", signature, constants, num_warps=8)["ttgir"]
    loop = ttgir[ttgir.index("scf.for") : ttgir.index("scf.yield")]
    dots = re.findall(r"ttng.warp_group_dot %\S+, %\S+, %\S+ \{inputPrecision = (\d)", loop)
    assert dots == ["0", "0", "0"]  # tf32, three times
    assert "local_alloc" not in loop and "inline_asm" not in loop
    assert loop.count("async_copy_global_to_local") == 4  # a, b and their remainders
