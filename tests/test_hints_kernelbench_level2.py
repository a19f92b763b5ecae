"""KernelBench level 2 (issue 12): a convolution or a product followed by an elementwise DAG over
its result and per-channel or single-value parameters (bias adds, scales, residual adds of the
result itself), fused as the conv and matmul families' epilogue (hints/core/epilogue.py), on
unchanged files: each is recognised by the family expected, every applicable strategy's
candidate passes the real gate on the Triton interpreter at the file's derived tiny size (with a
batch of two), and the offline generator proposes them."""

import random
from pathlib import Path

import pytest
from hints_checks import candidate_error, problem, with_gate_batch

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems.loader import load_problem
from hints import match_problem

LEVEL2 = Path(__file__).parent / "problems_kernelbench" / "level2"
CASES = [
    ("1_Conv2D_ReLU_BiasAdd.py", "conv", 1),
    ("2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py", "conv", 1),
    ("20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd.py", "conv", 1),
    ("31_Conv2d_Min_Add_Multiply.py", "conv", 1),  # min with `torch.tensor(c)`: a constant
    ("48_Conv3d_Scaling_Tanh_Multiply_Sigmoid.py", "conv", 2),
    ("57_Conv2d_ReLU_HardSwish.py", "conv", 0),
    ("93_ConvTranspose2d_Add_Min_GELU_Multiply.py", "conv", 0),
    ("40_Matmul_Scaling_ResidualAdd.py", "matmul", 0),
    ("68_Matmul_Min_Subtract.py", "matmul", 1),
    ("76_Gemm_Add_ReLU.py", "matmul", 1),
    ("95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py", "matmul", 1),
]  # (file, family, operands its epilogue reads)
STRICT = 1e-5  # fp32 accumulation at tiny sizes: observed ~1e-7


def gated(spec: str):
    """The file as the gate tests check it: at its derived tiny size with a batch of two."""
    return with_gate_batch(problem(spec, LEVEL2))


def applicable_strategies(spec: str) -> list:
    ((family, match),) = match_problem(gated(spec))
    return [(strategy, match) for strategy in family.strategies if strategy.applies_to(match)]


GATED = [  # one test a strategy: the slowest file's take 5-10 s each on two cores
    pytest.param(spec, strategy, match, id=f"{spec[:2]}-{strategy.name}")
    for spec, _, _ in CASES
    for strategy, match in applicable_strategies(spec)
]


def test_the_list_is_in_step_with_fetch_sh():
    listed = (LEVEL2 / "fetch.sh").read_text()
    assert all(spec in listed for spec, _, _ in CASES)


@pytest.mark.parametrize(("spec", "family", "operands"), CASES, ids=[c[0][:2] for c in CASES])
def test_recognised_with_its_epilogue_operands(spec, family, operands):
    ((found, match),) = match_problem(problem(spec, LEVEL2))
    assert found.name == family
    assert len(match.facts["epilogue_operands"]) == operands
    assert any(strategy.applies_to(match) for strategy in found.strategies)


def test_a_residual_add_reads_the_result_twice():
    ((_, match),) = match_problem(
        problem("20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd.py", LEVEL2)
    )
    assert match.facts["epilogue_operands"] == ("self.bias",)
    assert match.facts["epilogue_statements"].count("acc") >= 2


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(("spec", "strategy", "match"), GATED)
def test_every_applicable_strategy_passes_the_gate(spec, strategy, match, tmp_path):
    error = candidate_error(gated(spec), strategy.render(match), tmp_path)
    assert error < STRICT


@pytest.mark.parametrize("spec", [CASES[2][0], CASES[-1][0]])
def test_offline_generator_proposes_them(spec):
    target = load_problem(str(LEVEL2 / spec))
    generator = OfflineGenerator(target)
    generator.preflight()
    request = GenerationRequest(target, "coarse", 0, random.Random(0))
    assert generator.propose(request).proposals
