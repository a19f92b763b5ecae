"""The reduction hint family: matching from traced calls, and every strategy's candidates correct
on the CPU interpreter for the built-in problems and for unseen KernelBench files."""

import re

import pytest
import torch
from hints_checks import UNSEEN, candidate_error, problem, strategy
from sm90 import compile_for_sm90

from engine.problems import builtin_names, load_problem
from engine.problems.loader import import_module_from
from hints import match_problem
from hints.reductions import FAMILY

STRICT = 1e-5  # fp32 reductions over a few hundred values: observed errors are ~1e-7


def test_matches_softmax_and_rmsnorm_only_among_builtins():
    matched = {name for name in builtin_names() if FAMILY.match(problem(name))}
    assert matched == {"softmax", "rmsnorm"}


def test_registered_in_the_hint_library():
    assert "reduction" in [family.name for family, _ in match_problem(problem("rmsnorm"))]


def test_rmsnorm_facts_come_from_the_trace():
    facts = FAMILY.match(problem("rmsnorm")).facts
    assert (facts["op"], facts["dims"], facts["eps"]) == ("rmsnorm", [1], 1e-5)
    assert [112, 64, 512 * 512] in facts["views"]  # (outer, R, inner) of the full size


@pytest.mark.parametrize(
    ("spec", "op", "dims"),
    [
        ("softmax", "softmax", [1]),
        ("log_softmax_dim0.py", "log_softmax", [0]),
        ("layernorm.py", "layernorm", [1, 2, 3]),
        ("l2norm.py", "l2norm", [1]),
        ("rmsnorm_lastdim.py", "rmsnorm", [2]),
    ],
)
def test_recognises_the_normalization_and_its_axis(spec, op, dims):
    facts = FAMILY.match(problem(spec, UNSEEN)).facts
    assert (facts["op"], facts["dims"]) == (op, dims)


@pytest.mark.parametrize("spec", ["gelu.py", "matvec_1d.py", "linear_relu_div", "groupconv"])
def test_does_not_match_other_families(spec):
    assert FAMILY.match(problem(spec, UNSEEN)) is None


def test_strategies_follow_the_layout():
    applicable = {
        spec: {
            s.name for s in FAMILY.strategies if s.applies_to(FAMILY.match(problem(spec, UNSEEN)))
        }
        for spec in ("softmax", "rmsnorm", "rmsnorm_lastdim.py")
    }
    assert applicable["rmsnorm"] == {"reduction.channel_tile"}
    assert "reduction.online_single_pass" in applicable["softmax"]
    assert "reduction.split_row" in applicable["softmax"]  # 16 x 16384 rows in its ladder
    assert "reduction.resident_split" in applicable["softmax"]
    assert "reduction.whole_row" not in applicable["softmax"]  # 393216-long rows: no registers
    assert "reduction.whole_row" in applicable["rmsnorm_lastdim.py"]


POINTS = [
    ("rmsnorm_lastdim.py", "reduction.whole_row", {}),
    ("rmsnorm_lastdim.py", "reduction.whole_row", {"ROWS": 2, "num_warps": 2}),
    ("softmax", "reduction.looped_two_pass", {}),
    ("softmax", "reduction.looped_two_pass", {"BLOCK": 128, "num_stages": 1}),
    ("softmax", "reduction.online_single_pass", {}),
    ("softmax", "reduction.online_single_pass", {"BLOCK": 128, "num_warps": 4}),
    ("softmax", "reduction.split_row", {}),
    ("softmax", "reduction.split_row", {"BLOCK": 128, "WAVES": 2}),  # two splits per row
    ("softmax", "reduction.resident_split", {}),
    ("softmax", "reduction.resident_split", {"CHUNK": 2048, "num_warps": 4}),
    ("rmsnorm_lastdim.py", "reduction.resident_split", {}),
    ("rmsnorm", "reduction.channel_tile", {}),
    ("rmsnorm", "reduction.channel_tile", {"ELEMENTS_PER_PROGRAM": 128, "num_warps": 2}),
]


@pytest.mark.parametrize(("spec", "name", "params"), POINTS)
def test_strategy_points_are_correct_on_the_tiny_size(spec, name, params, tmp_path):
    target = problem(spec, UNSEEN)
    source = strategy(FAMILY, name).render(FAMILY.match(target), params)
    assert candidate_error(target, source, tmp_path) < STRICT


def test_one_candidate_serves_another_size_of_the_ladder(tmp_path):
    softmax = problem("softmax")
    source = strategy(FAMILY, "reduction.online_single_pass").render(FAMILY.match(softmax))
    assert candidate_error(softmax, source, tmp_path, dict(batch=3, dim=9000)) < STRICT


@pytest.mark.parametrize(
    "spec", ["log_softmax_dim0.py", "layernorm.py", "l2norm.py", "rmsnorm_lastdim.py"]
)
def test_unseen_normalizations_get_correct_candidates(spec, tmp_path):
    unseen = problem(spec, UNSEEN)
    match = FAMILY.match(unseen)
    applicable = [s for s in FAMILY.strategies if s.applies_to(match)]
    assert applicable
    for s in applicable:
        assert candidate_error(unseen, s.render(match), tmp_path) < STRICT, s.name


@pytest.mark.parametrize(
    "name", ["reduction.looped_two_pass", "reduction.split_row", "reduction.resident_split"]
)
def test_layernorm_uses_the_models_own_affine_parameters(name, tmp_path):
    layernorm = problem("layernorm.py", UNSEEN)
    path = tmp_path / "candidate.py"
    path.write_text(strategy(FAMILY, name).render(FAMILY.match(layernorm)))
    candidate = import_module_from(path, "candidate")
    torch.manual_seed(0)
    reference = torch.nn.LayerNorm((4, 5, 6)).double()
    with torch.no_grad():
        reference.weight.normal_()
        reference.bias.normal_()
    new = candidate.ModelNew((4, 5, 6))
    new.load_state_dict({f"ln.{k}": v.float() for k, v in reference.state_dict().items()})
    x = torch.randn(3, 4, 5, 6) * 3 + 100  # a mean far from zero: no cancellation allowed
    expected = reference(x.double())
    assert (new(x).double() - expected).abs().max() / expected.abs().max() < STRICT


def test_resident_split_compiles_for_the_h200_with_its_barrier(tmp_path):
    """The interpreter runs a row as one program; the GPU path (a row over co-resident programs
    meeting at an atomic counter) is compiled here ahead of time for sm_90: one program fits an
    SM without spills, and the barrier is a release/acquire pair."""
    path = tmp_path / "candidate.py"
    path.write_text(
        strategy(FAMILY, "reduction.resident_split").render(FAMILY.match(problem("softmax")))
    )
    pointers = dict.fromkeys(("x_ptr", "out_ptr", "w_ptr", "b_ptr", "ws_ptr"), "*fp32")
    scalars = dict.fromkeys(("outer", "R", "CHUNK", "SPLITS"), "i32")
    constants = {"BLOCK": 16384, "SPLITS_P2": 32, "HAS_WEIGHT": False, "HAS_BIAS": False}
    signature = {**pointers, "arrived_ptr": "*i32", **scalars, "eps": "fp32",
                 **dict.fromkeys(constants, "constexpr")}  # fmt: skip
    # The strategy's defaults: 16384 values over 16 warps.
    ptx, usage = compile_for_sm90(path, "resident_kernel", signature, constants, num_warps=16)
    assert "atom.global.gpu.acq_rel.add" in ptx  # arrival, releasing the stored partials
    assert "ld.global.gpu.acquire" in ptx  # the wait: the siblings' partials are visible after it
    assert "ld.global.cg" in ptx  # partials read past the (incoherent) L1
    registers = int(re.search(r"REG:(\d+)", usage).group(1))
    stack = int(re.search(r"STACK:(\d+)", usage).group(1))
    assert stack <= 64, usage  # spills land in the stack frame: a few bytes at most
    assert registers * 32 * 16 <= 65536, usage  # the H200's register file holds one program


FROBENIUS = UNSEEN.parent / "problems_kernelbench" / "level1" / "37_FrobeniusNorm_.py"


def test_a_whole_tensor_norm_is_split_over_programs_that_sum_in_float64(tmp_path):
    """37_FrobeniusNorm_ on the H200 (1.9e9 values, strict): one program per row was one
    program; the resident kernel's row of 132 chunks needed tl.arange(0, 2**24), past Triton's
    largest tensor (a compile error); fp32 lanes drifted to 1.6e-4 and 3.2e-7 against a
    tolerance of 1.2e-7. Only the split kernel is offered, its partials fp64 end to end."""
    frobenius = load_problem(str(FROBENIUS), "strict")
    match = FAMILY.match(frobenius)
    assert [s.name for s in FAMILY.strategies if s.applies_to(match)] == ["reduction.split_row"]
    source = strategy(FAMILY, "reduction.split_row").render(match, {"BLOCK": 128})
    assert "dtype=torch.float64" in source  # the partials between the two kernels
    # Eight chunks of the tiny size's 1024 values, merged: within twice fp32's unit roundoff.
    assert candidate_error(frobenius, source, tmp_path) < torch.finfo(torch.float32).eps
    path = tmp_path / "candidate.py"
    path.write_text(source)
    signature = {"x_ptr": "*fp32", "ws_ptr": "*fp64", "R": "i32", "CHUNK": "i32", "SPLITS": "i32",
                 "BLOCK": "constexpr"}  # fmt: skip
    ptx, usage = compile_for_sm90(path, "partial_kernel", signature, {"BLOCK": 2048}, num_warps=8)
    assert re.search(r"add(\.rn)?\.f64", ptx)  # the lanes add squares in fp64
    assert int(re.search(r"STACK:(\d+)", usage).group(1)) == 0, usage
