"""The families of issue 12 item 2 (reductions over any dims, norms, pooling, losses with
cross-entropy and the triplet margin loss, scans with the exclusive cumsum, elementwise DAGs with
broadcasting, a product followed by elementwise math and a row softmax) on unchanged KernelBench
level 1 and 2 files and on our own problems: each is recognised by the family expected, every
applicable strategy's candidate passes the real gate on the Triton interpreter (also off the
defaults, over several chunks), and the offline generator proposes them."""

import random
from pathlib import Path

import pytest
import torch
from hints_checks import (
    UNSEEN,
    UNSEEN_MM,
    candidate_error,
    cpu_gate,
    problem,
    strategy,
    with_gate_batch,
)

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems.loader import import_module_from, load_problem
from engine.runner.calls import MODULE_GLOBALS
from hints import match_problem

KERNELBENCH = Path(__file__).parent / "problems_kernelbench"
LEVEL1 = KERNELBENCH / "level1"
LEVEL2 = KERNELBENCH / "level2"
CASES = [
    (LEVEL1, "37_FrobeniusNorm_.py", "reduction"),
    (LEVEL1, "38_L1Norm_.py", "reduction"),
    (LEVEL1, "41_Max_Pooling_1D.py", "pooling"),
    (LEVEL1, "42_Max_Pooling_2D.py", "pooling"),
    (LEVEL1, "43_Max_Pooling_3D.py", "pooling"),
    (LEVEL1, "44_Average_Pooling_1D.py", "pooling"),
    (LEVEL1, "45_Average_Pooling_2D.py", "pooling"),
    (LEVEL1, "46_Average_Pooling_3D.py", "pooling"),
    (LEVEL1, "47_Sum_reduction_over_a_dimension.py", "reduce"),
    (LEVEL1, "48_Mean_reduction_over_a_dimension.py", "reduce"),
    (LEVEL1, "49_Max_reduction_over_a_dimension.py", "reduce"),
    (LEVEL1, "51_Argmax_over_a_dimension.py", "reduce"),
    (LEVEL1, "52_Argmin_over_a_dimension.py", "reduce"),
    (LEVEL1, "53_Min_reduction_over_a_dimension.py", "reduce"),
    (LEVEL1, "88_MinGPTNewGelu.py", "elementwise"),
    (LEVEL1, "89_cumsum.py", "scan"),
    (LEVEL1, "90_cumprod.py", "scan"),
    (LEVEL1, "91_cumsum_reverse.py", "scan"),
    (LEVEL1, "93_masked_cumsum.py", "scan"),
    (LEVEL1, "94_MSELoss.py", "reduce"),
    (LEVEL1, "96_HuberLoss.py", "reduce"),
    (LEVEL1, "98_KLDivLoss.py", "reduce"),
    (LEVEL1, "100_HingeLoss.py", "reduce"),
    (UNSEEN, "bias_where_broadcast.py", "elementwise"),
    (UNSEEN, "avgpool2d_ceil_no_pad_count.py", "pooling"),
    (UNSEEN, "cumprod_middle_reversed.py", "scan"),
    (UNSEEN, "norm_lastdims.py", "reduce"),
    (LEVEL1, "92_cumsum_exclusive.py", "scan"),
    (UNSEEN, "cumsum_exclusive_middle.py", "scan"),
    (LEVEL1, "95_CrossEntropyLoss.py", "cross_entropy"),
    (UNSEEN, "nll_log_softmax_ignored.py", "cross_entropy"),
    (UNSEEN, "cross_entropy_per_row.py", "cross_entropy"),
    (LEVEL2, "99_Matmul_GELU_Softmax.py", "product_softmax"),
    (UNSEEN_MM, "matmul_tanh_log_softmax.py", "product_softmax"),
    (LEVEL1, "16_Matmul_with_transposed_A.py", "matmul"),
    (LEVEL1, "17_Matmul_with_transposed_B.py", "matmul"),
    (LEVEL1, "18_Matmul_with_transposed_both.py", "matmul"),
    (LEVEL1, "14_Matmul_for_upper_triangular_matrices.py", "matmul"),
    (LEVEL1, "15_Matmul_for_lower_triangular_matrices.py", "matmul"),
    (LEVEL1, "11_4D_tensor_matrix_multiplication.py", "matmul"),
    (LEVEL1, "33_BatchNorm.py", "channel_norm"),
    (LEVEL1, "34_InstanceNorm.py", "channel_norm"),
    (LEVEL1, "35_GroupNorm_.py", "channel_norm"),
    (LEVEL1, "99_TripletMarginLoss.py", "triplet"),
    (UNSEEN, "triplet_swap_l1_sum.py", "triplet"),
]
STRICT = 2e-7  # fp32 math over at most a few thousand values; the gate's own bound is tighter


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(("folder", "spec", "family"), CASES, ids=[c[1] for c in CASES])
def test_recognised_and_every_strategy_passes_the_gate(folder, spec, family, tmp_path):
    target = problem(spec, folder)
    if family == "pooling":  # the slowest to interpret
        target = with_gate_batch(target)
    found = match_problem(target)
    assert [f.name for f, _ in found] == [family]
    (fam, match), = found  # fmt: skip
    applicable = [s for s in fam.strategies if s.applies_to(match)]
    assert applicable
    for s in applicable:
        assert candidate_error(target, s.render(match), tmp_path) < STRICT, s.name


def kernelbench_size(**constants) -> dict:
    return {MODULE_GLOBALS: constants}


# Points off the defaults, at sizes that make loops take several chunks and rows split.
POINTS = [
    (LEVEL1, "89_cumsum.py", "scan.row_chunks", {"BLOCK": 256},
     kernelbench_size(batch_size=2, input_shape=(700,))),
    (LEVEL1, "91_cumsum_reverse.py", "scan.row_chunks", {"BLOCK": 256},
     kernelbench_size(batch_size=2, input_shape=(700,))),
    (LEVEL1, "94_MSELoss.py", "reduce.rows", {"BLOCK_R": 128, "ROWS": 1},
     kernelbench_size(batch_size=3, input_shape=(300,))),
    (LEVEL1, "94_MSELoss.py", "reduce.split", {"BLOCK": 512},
     kernelbench_size(batch_size=3, input_shape=(300,))),
    (LEVEL1, "47_Sum_reduction_over_a_dimension.py", "reduce.columns",
     {"BLOCK_INNER": 16, "ELEMENTS_PER_PROGRAM": 512},
     kernelbench_size(batch_size=2, dim1=70, dim2=40)),
    (LEVEL1, "51_Argmax_over_a_dimension.py", "reduce.columns",
     {"BLOCK_INNER": 16, "ELEMENTS_PER_PROGRAM": 512},
     kernelbench_size(batch_size=2, dim1=70, dim2=40)),
    (LEVEL1, "42_Max_Pooling_2D.py", "pooling.output_rows", {"BLOCK": 32},
     kernelbench_size(batch_size=2, channels=2, height=8, width=70)),
    (LEVEL1, "92_cumsum_exclusive.py", "scan.row_chunks", {"BLOCK": 256},
     kernelbench_size(batch_size=2, input_shape=(700,))),
    (UNSEEN, "cumsum_exclusive_middle.py", "scan.column_steps", {"BLOCK_INNER": 32},
     dict(batch=2, steps=9, width=70)),
    (UNSEEN, "cross_entropy_per_row.py", "cross_entropy.online_rows",
     {"BLOCK_C": 128, "ROWS": 1}, dict(rows=5, classes=1000)),
    (UNSEEN, "nll_log_softmax_ignored.py", "cross_entropy.online_rows",
     {"BLOCK_C": 256, "ROWS": 16, "ELEMENTS_PER_PROGRAM": 16384}, dict(rows=1500, classes=300)),
    (LEVEL2, "99_Matmul_GELU_Softmax.py", "product_softmax.tile_statistics",
     {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "NORM_BLOCK": 256, "NORM_ROWS": 2},
     kernelbench_size(batch_size=20, in_features=70, out_features=300)),
    (UNSEEN_MM, "matmul_tanh_log_softmax.py", "product_softmax.row_resident",
     {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16},
     dict(batch=20, in_features=33, out_features=100)),
    (LEVEL1, "14_Matmul_for_upper_triangular_matrices.py", "matmul.tiled_grouped",
     {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}, kernelbench_size(N=70)),
    (LEVEL1, "33_BatchNorm.py", "channel_norm.split_stats", {"BLOCK": 256, "MAX_SPLITS": 16},
     kernelbench_size(batch_size=3, features=5, dim1=20, dim2=30)),
    (LEVEL1, "35_GroupNorm_.py", "channel_norm.split_stats", {"BLOCK": 256, "MAX_SPLITS": 16},
     kernelbench_size(batch_size=2, features=16, num_groups=8, dim1=20, dim2=30)),
]  # fmt: skip


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(("folder", "spec", "name", "params", "size"), POINTS)
def test_strategy_points_are_correct_over_several_chunks(
    folder, spec, name, params, size, tmp_path
):
    target = problem(spec, folder)
    (fam, match), = match_problem(target)  # fmt: skip
    source = strategy(fam, name).render(match, params)
    assert candidate_error(target, source, tmp_path, size) < STRICT


@pytest.mark.parametrize(
    "spec", ["94_MSELoss.py", "96_HuberLoss.py", "98_KLDivLoss.py", "100_HingeLoss.py"]
)
def test_losses_to_one_value_pass_the_gate_on_many_seeds(spec):
    """One output value is judged against a single rounding of PyTorch's: fp32 math in another
    order failed 8 to 20% of the seeds (seed 1 of 98 among them), fp64 math none of 100."""
    target = problem(spec, LEVEL1)
    (fam, match), = match_problem(target)  # fmt: skip
    for s in fam.strategies:
        if s.applies_to(match):
            result = cpu_gate().check(target, s.render(match), seeds=list(range(16)))
            assert result.passed, f"{s.name}: {result.message}"


def test_batch_norm_in_training_mode_normalizes_by_the_batch_and_updates_running_statistics(
    tmp_path,
):
    """The gate judges in eval mode (running statistics); KernelBench runs its modules in
    training mode, where the candidate must use the batch's statistics and update the running
    ones (and the batch counter) as PyTorch does, step after step."""
    target = problem("33_BatchNorm.py", LEVEL1)
    (fam, match), = match_problem(target)  # fmt: skip
    source = strategy(fam, "channel_norm.split_stats").render(match, {"BLOCK": 256})
    (tmp_path / "candidate.py").write_text(source)
    model = import_module_from(target.path, "reference").Model(5)
    candidate = import_module_from(tmp_path / "candidate.py", "candidate").ModelNew(5)
    candidate.load_state_dict(model.state_dict())
    torch.manual_seed(0)
    with torch.no_grad():
        for _ in range(2):
            x = torch.rand(3, 5, 20, 30) * 4 + 10  # a mean far from zero
            torch.testing.assert_close(candidate(x), model(x), rtol=0, atol=1e-5)
            for name, value in model.state_dict().items():
                torch.testing.assert_close(candidate.state_dict()[name], value)


@pytest.mark.parametrize(
    "path",
    [
        LEVEL1 / "38_L1Norm_.py",  # the six files issue 12 found refused
        LEVEL1 / "42_Max_Pooling_2D.py",
        LEVEL1 / "47_Sum_reduction_over_a_dimension.py",
        LEVEL1 / "88_MinGPTNewGelu.py",
        LEVEL1 / "95_CrossEntropyLoss.py",
        LEVEL2 / "99_Matmul_GELU_Softmax.py",
        LEVEL1 / "89_cumsum.py",
        LEVEL1 / "92_cumsum_exclusive.py",
        LEVEL1 / "94_MSELoss.py",
        LEVEL1 / "18_Matmul_with_transposed_both.py",
        LEVEL1 / "35_GroupNorm_.py",
        LEVEL1 / "11_4D_tensor_matrix_multiplication.py",
    ],
    ids=lambda p: p.name,
)
def test_offline_generator_proposes_them(path):
    target = load_problem(str(path))
    generator = OfflineGenerator(target)
    generator.preflight()
    request = GenerationRequest(target, "coarse", 0, random.Random(0))
    assert generator.propose(request).proposals


class LaunchRecorder:
    """Stands for a candidate's kernel in its module: records each launch's grid, then launches
    the real kernel with it."""

    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        self.grids.append(grid)
        return self.kernel[grid]


@pytest.mark.parametrize("spec", ["94_MSELoss.py", "98_KLDivLoss.py"])
def test_a_loss_to_one_value_is_first_proposed_split_over_many_programs(spec, tmp_path):
    """A one-program loop over the whole tensor ran 98_KLDivLoss at 0.001x of eager on the
    H200: the coarse round now proposes only the split kernel, SMs x WAVES programs (the
    interpreter counts 2 SMs, the H200 132) whose fp64 partials a second kernel merges."""
    target = problem(spec, LEVEL1)
    request = GenerationRequest(target, "coarse", 0, random.Random(0))
    proposals = OfflineGenerator(target, "cpu").propose(request).proposals
    assert [p.origin for p in proposals] == ["reduce.split"]
    (tmp_path / "candidate.py").write_text(proposals[0].source)
    candidate = import_module_from(tmp_path / "candidate.py", "candidate")
    candidate.partial_kernel = recorder = LaunchRecorder(candidate.partial_kernel)
    torch.manual_seed(0)
    inputs = [torch.rand(64, 1024).softmax(dim=-1) for _ in range(2)]
    got = candidate.ModelNew()(*inputs)
    assert recorder.grids == [(1, 2 * proposals[0].params["WAVES"])]  # 16 chunks of 4096
    expected = import_module_from(target.path, "reference").Model()(*(x.double() for x in inputs))
    torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=0)
