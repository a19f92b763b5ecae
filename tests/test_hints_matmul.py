"""The matmul hint family: matching from traced calls, and every strategy's candidates correct
on the CPU interpreter for the built-in problem and for unseen KernelBench files."""

import pytest
import torch
from hints_checks import candidate_error, problem, strategy

from engine.problems import builtin_names
from engine.problems.loader import import_module_from
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
    ("matmul.split_k", {"SPLIT_K": 8, "BLOCK_K": 16, "BLOCK_M": 32, "BLOCK_N": 32}),
    ("matmul.persistent", {}),
    ("matmul.persistent", {"BLOCK_M": 32, "BLOCK_N": 32, "GROUP_M": 4}),
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


@pytest.mark.parametrize(
    ("precision", "k_major"), [("tf32x3", True), ("tf32", True), ("ieee", False)]
)
def test_tensor_core_products_read_an_fp32_b_k_major(precision, k_major, tmp_path):
    """From an N-major fp32 B, Triton's TF32 products ran 2 to 3 times slower on the H200: the
    tensor-core candidates copy such a B K-major (ieee reads it as it is), and stay correct on a
    batched product."""
    bmm = problem("bmm_relu.py")
    path = tmp_path / "candidate.py"
    path.write_text(strategy(FAMILY, "matmul.tiled_grouped").render(
        FAMILY.match(bmm), {"precision": precision, "BLOCK_K": 16}))  # fmt: skip
    candidate = import_module_from(path, "candidate")
    b = torch.randn(3, 24, 40)
    _, b3, _, _ = candidate.operands(torch.randn(3, 8, 24), b)
    assert (b3.stride(-2) == 1) == k_major
    assert torch.equal(b3, b)
    assert candidate_error(bmm, path.read_text(), tmp_path) < STRICT
