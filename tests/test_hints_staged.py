"""The staged family (hints/staged.py, issue 12): KernelBench level 2 files that no family
recognises whole (a convolution or product, then a norm, a pooling, a reduction, a softmax or a
logsumexp, with elementwise math around them), cut into stages that other families recognise, on
unchanged files: each is recognised as staged with the stages expected, its candidate passes the
real gate on the Triton interpreter at the file's derived tiny size, and the offline generator
proposes it. Plus the cutting rule itself, on forward sources and a recogniser of our own."""

import ast
import random
from pathlib import Path

import pytest
from hints_checks import cpu_gate

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems.loader import load_problem
from hints import match_problem, stages

LEVEL2 = Path(__file__).parent / "problems_kernelbench" / "level2"
CASES = [
    (
        "13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling.py",
        "conv reduce elementwise reduction elementwise",
    ),
    ("14_Gemm_Divide_Sum_Scaling.py", "matmul reduce"),
    ("17_Conv2d_InstanceNorm_Divide.py", "conv channel_norm elementwise"),
    (
        "28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py",
        "matmul views channel_norm views elementwise",
    ),
    ("30_Gemm_GroupNorm_Hardtanh.py", "matmul channel_norm elementwise"),
    ("33_Gemm_Scale_BatchNorm.py", "matmul channel_norm"),
    (
        "38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py",
        "pooling conv views reduction views elementwise",
    ),  # `b, c, d, h, w = x.shape`: views that leave several values
    ("45_Gemm_Sigmoid_LogSumExp.py", "matmul matmul reduce"),
    ("46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py", "conv pooling"),
    ("52_Conv2d_Activation_BatchNorm.py", "conv channel_norm"),  # torch.multiply: mul
    ("55_Matmul_MaxPool_Sum_Scale.py", "matmul pooling views reduce"),  # the pool's squeeze
    ("67_Conv2d_GELU_GlobalAvgPool.py", "conv reduce views"),
    ("83_Conv3d_GroupNorm_Min_Clamp_Dropout.py", "conv channel_norm elementwise"),
    (
        "89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py",
        "conv pooling reduction views reduce",
    ),  # `self.subtract.view(1, -1, 1, 1, 1)`: a views stage of its own
    ("92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py", "conv channel_norm reduce"),
    ("98_Matmul_AvgPool_GELU_Scale_Max.py", "matmul pooling views reduce"),  # a scaled window
]  # fmt: skip  (file, the family of each stage in turn; "views": forward's own reshapes)


def kinds(match) -> str:
    return " ".join(s.get("family", s["kind"]) for s in match.facts["stages"])


def test_the_list_is_in_step_with_fetch_sh():
    listed = (LEVEL2 / "fetch.sh").read_text()
    assert all(spec in listed for spec, _ in CASES)


FORWARD = '''
class Model:
    def forward(self, x, y):
        """Docstring."""
        x = torch.relu(self.conv(x) + 1.0)
        skip = x
        x = torch.max(x, dim=1)[0].view(x.size(0), -1)
        return x * y + skip.sum()
'''


def test_flattening_gives_one_operator_call_a_statement():
    args, statements = stages.forward_statements(FORWARD)
    assert [a.arg for a in args.args] == ["self", "x", "y"]
    assert [ast.unparse(s.node) for s in statements] == [
        "_kb_t0 = self.conv(x)",
        "_kb_t1 = _kb_t0 + 1.0",
        "x = torch.relu(_kb_t1)",
        "skip = x",
        "_kb_t2 = torch.max(x, dim=1)[0]",  # one value: the subscript stays with its call
        "x = _kb_t2.view(x.size(0), -1)",  # size calls stay where they are
        "_kb_t3 = x * y",
        "_kb_t4 = skip.sum()",
        "return _kb_t3 + _kb_t4",
    ]


def test_a_segment_reads_earlier_values_and_leaves_one():
    args, statements = stages.forward_statements(FORWARD)
    params = ("self", "x", "y")
    conv = stages.segment(statements, params, 0, 3)
    assert (conv.inputs, conv.output) == (("x",), "x")
    assert stages.segment(statements, params, 0, 4) is None  # x and skip both read later
    last = stages.segment(statements, params, 6, 9)
    assert (last.inputs, last.output) == (("x", "y", "skip"), None)
    assert stages.is_view_only(statements[5:6]) and not stages.is_view_only(statements[4:5])


def test_the_cut_takes_the_longest_recognised_run_from_each_start():
    recognised = {(0, 1), (0, 3), (1, 2), (3, 4), (3, 6), (4, 6), (6, 7)}
    chain = stages.cut(7, lambda a, b: "yes" if (a, b) in recognised else None)
    assert [(a, b) for a, b, _ in chain] == [(0, 3), (3, 6), (6, 7)]
    assert stages.cut(7, lambda a, b: "yes" if (a, b) in recognised - {(6, 7)} else None) is None


def test_control_flow_is_not_cut():
    source = FORWARD.replace("skip = x", "if x.sum() > 0:\n            x = -x")
    assert stages.forward_statements(source) is None


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(("spec", "expected"), CASES, ids=[c[0][:2] for c in CASES])
def test_recognised_in_stages_and_passes_the_gate(spec, expected):
    target = load_problem(str(LEVEL2 / spec))
    found = match_problem(target)
    assert [family.name for family, _ in found] == ["staged"]
    ((family, match),) = found
    assert kinds(match) == expected
    (strategy,) = family.strategies
    result = cpu_gate().check(target, strategy.render(match), None)
    assert result.passed, f"{result.reason}: {result.message}"


def test_a_pool_window_that_scales_with_the_size_is_kept_per_input_shape():
    target = load_problem(str(LEVEL2 / "98_Matmul_AvgPool_GELU_Scale_Max.py"))
    ((_, match),) = match_problem(target)
    (pool,) = [s for s in match.facts["stages"] if s.get("family") == "pooling"]
    kernels = [(shape, kernel) for shape, kernel, *_ in pool["facts"]["windows"]]
    assert kernels == [([16, 1, 128], [1, 1, 4]), ([1024, 1, 8192], [1, 1, 16])]


def test_offline_generator_proposes_them():
    target = load_problem(str(LEVEL2 / CASES[5][0]))
    generator = OfflineGenerator(target)
    generator.preflight()
    request = GenerationRequest(target, "coarse", 0, random.Random(0))
    (proposal,) = generator.propose(request).proposals
    assert proposal.origin == "staged.chain"
    assert "class ModelNew(torch.nn.Module)" in proposal.source
