"""The conv family beyond 2D (issue 12 item 2): 1D and 3D convolutions, transposed ones (1D, 2D,
3D, with stride, padding, output padding, dilation, groups) as a gather, and a depthwise conv
followed by a pointwise one, on unchanged KernelBench level 1 files: each is recognised, every
applicable strategy's candidate passes the real gate on the Triton interpreter (at sizes that
also take the tl.dot and stencil paths), and the offline generator proposes them."""

import random
from pathlib import Path

import pytest
from hints_checks import candidate_error, problem

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems.loader import load_problem
from engine.runner.calls import MODULE_GLOBALS
from hints import match_problem

LEVEL1 = Path(__file__).parent / "problems_kernelbench" / "level1"
# Every level 1 convolution the family did not take before: 3D, 1D, transposed, separable.
FILES = sorted(
    path.name
    for path in LEVEL1.glob("*.py")
    if "conv" in path.name and any(w in path.name for w in ("3D", "1D", "transposed", "separable"))
)
STRICT = 1e-5  # fp32 accumulation of at most a few thousand products: observed ~3e-7


def test_every_file_is_kept():
    assert len(FILES) == 24


@pytest.mark.parametrize("spec", FILES)
def test_recognised_by_the_conv_family(spec):
    found = match_problem(problem(spec, LEVEL1))
    assert [family.name for family, _ in found] == ["conv"]


def facts(spec: str) -> dict:
    ((_, match),) = match_problem(problem(spec, LEVEL1))
    return match.facts


def test_transposed_3d_geometry_comes_from_the_trace():
    (geometry,) = facts(
        "72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_.py"
    )["geometry"]
    assert geometry == {
        "transposed": True,
        "stride": (2, 2, 2),
        "padding": (1, 2, 3),
        "dilation": (1, 1, 1),
        "output_padding": (1, 1, 1),
        "groups": 4,
    }


def test_1d_dims_are_padded_to_three():
    (geometry,) = facts("76_conv_standard_1D_dilated_strided__.py")["geometry"]
    assert (geometry["stride"], geometry["dilation"]) == ((1, 1, 3), (1, 1, 4))


def test_depthwise_separable_chains_two_convolutions():
    found = facts("86_conv_depthwise_separable_2D.py")
    assert found["forward_body"] == (
        "conv(conv(x, self.depthwise.weight, None, 0), self.pointwise.weight, None, 1)"
    )
    assert [g["padding"] for g in found["geometry"]] == [(0, 1, 1), (0, 0, 0)]


def size(**constants) -> dict:
    return {MODULE_GLOBALS: constants}


# A custom size names every constant of the file that is not to stay at its full value.
NARROW = dict(in_channels=4, out_channels=4, batch_size=2)
WIDE = dict(in_channels=16, out_channels=16, batch_size=1)  # groups wide enough for tl.dot
# (file, strategy parameters, size): None is the file's derived tiny size; the others keep the
# interpreter's grids small, and WIDE ones take the implicit GEMM's tl.dot path.
GATE_CASES = [
    ("67_conv_standard_1D.py", {}, None),
    ("76_conv_standard_1D_dilated_strided__.py", {}, None),
    ("64_conv_transposed_1D.py", {}, None),
    ("79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__.py",
     {}, None),
    ("69_conv_transposed_2D__asymmetric_input__asymmetric_kernel.py", {}, None),
    ("75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____"
     "dilated__.py", {"BLOCK_H": 16, "BLOCK_W": 32}, size(**NARROW, height=8, width=16)),
    ("86_conv_depthwise_separable_2D.py", {}, size(**NARROW, height=8, width=8)),
    ("54_conv_standard_3D__square_input__square_kernel.py", {},
     size(batch_size=1, out_channels=8, depth=5, width=5, height=5)),
    ("72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_.py",
     {"BLOCK_H": 32, "BLOCK_W": 16}, size(**NARROW, depth=2, height=4, width=4)),
    ("81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__.py",
     {}, size(**WIDE, height_in=3, width_in=5)),
    ("66_conv_standard_3D__asymmetric_input__asymmetric_kernel.py", {},
     size(**WIDE, depth=4, height=6, width=8)),
    ("77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__.py", {},
     size(**WIDE, depth=2, height=2, width=3)),
]  # fmt: skip


@pytest.mark.slow  # a sweep through the gate
@pytest.mark.parametrize(("spec", "params", "at"), GATE_CASES, ids=[c[0][:2] for c in GATE_CASES])
def test_every_applicable_strategy_passes_the_gate(spec, params, at, tmp_path):
    target = problem(spec, LEVEL1)
    ((family, match),) = match_problem(target)
    applicable = [s for s in family.strategies if s.applies_to(match)]
    assert applicable
    for strategy in applicable:
        source = strategy.render(match, params)
        assert candidate_error(target, source, tmp_path, at) < STRICT, strategy.name


@pytest.mark.parametrize(
    "spec",
    [
        "54_conv_standard_3D__square_input__square_kernel.py",
        "64_conv_transposed_1D.py",
        "86_conv_depthwise_separable_2D.py",
    ],
)
def test_offline_generator_proposes_them(spec):
    target = load_problem(str(LEVEL1 / spec))
    generator = OfflineGenerator(target)
    generator.preflight()
    request = GenerationRequest(target, "coarse", 0, random.Random(0))
    assert generator.propose(request).proposals
