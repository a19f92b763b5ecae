"""Writes in place in a reference (hints.core.dataflow): `nn.ReLU(inplace=True)`, `x += y`,
`x.mul_(2)` are values of the dataflow like any call, so a family's epilogue computes them; a write
the graph cannot follow (through a view, or `x[i] = v`) leaves the reference to the whole-model
family, which keeps the Model's own code. A write into the Model's state (nn.BatchNorm counting its
batches: tests/test_hints_item2_families.py) is a side effect the graph leaves out, unless the
forward reads the state again. Candidates go through the real gate on the interpreter."""

import random
from pathlib import Path

import pytest
from hints_checks import candidate_error

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems.loader import load_problem
from hints import match_problem
from hints.core.dataflow import trace_graph


def conv_then(tmp_path: Path, init: str, forward: str):
    """A 3x3 convolution of a 2x3x8x8 input, then `forward` on its output x."""
    body = "\n".join(f"        {line}" for line in forward.splitlines())
    path = tmp_path / "problem.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        f"        self.conv = nn.Conv2d(3, 8, 3, padding=1)\n        {init}\n\n"
        f"    def forward(self, x):\n        x = self.conv(x)\n{body}\n        return x\n\n\n"
        "def get_inputs():\n    return [torch.randn(2, 3, 8, 8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return load_problem(str(path))


def first_proposal(problem):
    """The first proposal of a search on the cpu, whose gate checks it here."""
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    return OfflineGenerator(problem, backend="cpu").propose(request).proposals[0]


@pytest.mark.parametrize(
    ("init", "forward", "epilogue"),
    [
        ("self.act = nn.ReLU(inplace=True)", "x = self.act(x)", "tl.maximum(acc, 0.0)"),
        # nn.ReLU6 passes inplace to F.hardtanh by position
        ("self.act = nn.ReLU6(inplace=True)", "x = self.act(x)", "tl.minimum(tl.maximum"),
        ("pass", "x += 1.0\nx = torch.relu(x)", "acc + 1.0"),
        ("pass", "x.mul_(2.0)", "acc * 2.0"),
    ],
    ids=["relu-inplace", "relu6-inplace-by-position", "iadd", "mul_"],
)
def test_a_write_in_place_joins_the_producers_epilogue(tmp_path, init, forward, epilogue):
    problem = conv_then(tmp_path, init, forward)
    proposal = first_proposal(problem)
    assert proposal.origin.startswith("conv"), proposal.origin
    assert epilogue in proposal.source
    candidate_error(problem, proposal.source, tmp_path)


@pytest.mark.parametrize(
    ("init", "forward"),
    [
        ("pass", "y = x.view(-1)\ny.relu_()"),
        ("pass", "x[x < 0] = 0.0"),
        ("pass", "y = x.view(x.shape)\ntorch.relu_(y)\nx = x * 2"),
        ("self.register_buffer('s', torch.ones(1))", "self.s.mul_(2.0)\nx = x * self.s"),
    ],
    ids=["through-a-view", "setitem", "base-read-after-its-view-changed", "state-read-after-write"],
)
def test_a_write_the_dataflow_cannot_follow_is_left_to_the_models_own_code(tmp_path, init, forward):
    problem = conv_then(tmp_path, init, forward)
    assert trace_graph(problem) is None
    assert [family.name for family, _ in match_problem(problem)] == ["model"]
    if forward.startswith("x[x"):  # neither a stage of views (it computes) nor a wrong epilogue
        candidate_error(problem, first_proposal(problem).source, tmp_path)
