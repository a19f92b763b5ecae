"""The matrix-vector hint family: matching from traced calls, and every strategy's candidates
correct on the CPU interpreter for the built-in problem and for unseen KernelBench files."""

import pytest
from hints_checks import UNSEEN, candidate_error, problem, strategy

from engine.problems import builtin_names
from hints import match_problem
from hints.matvec import FAMILY

STRICT = 1e-5  # fp32 dot products of a few hundred terms: observed errors are ~1e-7


def test_matches_the_matvec_problem_only_among_builtins():
    matched = {name for name in builtin_names() if FAMILY.match(problem(name))}
    assert matched == {"matvec"}
    assert "matvec" in [family.name for family, _ in match_problem(problem("matvec"))]


def test_layouts_come_from_the_trace():
    assert FAMILY.match(problem("matvec")).facts["out_shape"] == "(a.shape[0], 1)"
    assert FAMILY.match(problem("matvec_1d.py", UNSEEN)).facts["out_shape"] == "(A.shape[0],)"
    row = FAMILY.match(problem("linear_single_row.py", UNSEEN)).facts
    assert (row["layout"], row["a_expr"], row["bias_expr"]) == (
        "row_linear",
        "self.proj.weight",
        "self.proj.bias",
    )


def test_split_k_applies_to_few_rows_with_long_k_only():
    assert strategy(FAMILY, "matvec.split_k").applies_to(FAMILY.match(problem("matvec")))
    assert not strategy(FAMILY, "matvec.split_k").applies_to(
        FAMILY.match(problem("linear_single_row.py", UNSEEN))
    )


POINTS = [
    ("matvec.row_block", {}),
    ("matvec.row_block", {"BLOCK_M": 1, "BLOCK_K": 256, "num_warps": 2}),
    ("matvec.persistent", {}),
    ("matvec.persistent", {"BLOCK_M": 2, "BLOCK_K": 256, "programs_per_sm": 1}),
    ("matvec.split_k", {}),
    ("matvec.split_k", {"BLOCK_K": 256, "WAVES": 8}),  # several splits of K = 300
    ("matvec.split_k", {"BLOCK_K": 256, "WAVES": 8, "ATOMIC": True}),
]


@pytest.mark.parametrize(("name", "params"), POINTS)
def test_strategy_points_are_correct_on_the_tiny_size(name, params, tmp_path):
    matvec = problem("matvec")
    source = strategy(FAMILY, name).render(FAMILY.match(matvec), params)
    assert candidate_error(matvec, source, tmp_path) < STRICT


@pytest.mark.parametrize("spec", ["matvec_1d.py", "linear_single_row.py"])
def test_unseen_products_get_correct_candidates(spec, tmp_path):
    unseen = problem(spec, UNSEEN)
    match = FAMILY.match(unseen)
    for s in [s for s in FAMILY.strategies if s.applies_to(match)]:
        assert candidate_error(unseen, s.render(match), tmp_path) < STRICT, s.name
