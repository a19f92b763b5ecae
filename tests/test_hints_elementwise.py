"""The elementwise hint family and `epilogue_expression`: traced chains become Triton
expressions, and the family's candidates are correct on the CPU interpreter."""

import os

os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from hints_checks import candidate_error  # noqa: E402

from engine.problems import builtin_names, load_problem  # noqa: E402
from engine.problems.trace import OperatorRecorder  # noqa: E402
from hints.core.expressions import epilogue_expression  # noqa: E402
from hints.elementwise import FAMILY  # noqa: E402

UNSEEN = Path(__file__).parent / "problems_unseen"


def traced(fn):
    """The operator calls `fn` makes on a meta tensor."""
    with torch.device("meta"), OperatorRecorder() as recorder:
        fn(torch.empty(4, 4))
    return recorder.calls


@triton.jit
def apply_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EXPR: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, EXPR(acc), mask=offsets < n)


def evaluate(expression: str, x: torch.Tensor) -> torch.Tensor:
    """Run `expression` (in `acc`) in a real Triton kernel on the interpreter."""
    namespace = {"tl": tl, "triton": triton}
    exec(f"@triton.jit\ndef expr(acc):\n    return {expression}\n", namespace)
    out = torch.empty_like(x)
    apply_kernel[(1,)](
        x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()), EXPR=namespace["expr"]
    )
    return out


def test_relu_then_divide_reads_like_the_math():
    calls = traced(lambda x: torch.relu(x) / 2.0)
    assert epilogue_expression(calls) == "tl.maximum(acc, 0.0) / 2.0"
    assert epilogue_expression(calls, var="y") == "tl.maximum(y, 0.0) / 2.0"


CHAINS = [
    lambda x: torch.nn.functional.gelu(x) * 3.0 - 1.0,
    lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    lambda x: 2.0 - torch.sigmoid(x),  # reflected: the scalar comes first
    lambda x: 1.0 / (torch.tanh(x) + 2.0),
    lambda x: torch.clamp(torch.nn.functional.silu(x), min=-0.1, max=0.5),
    lambda x: torch.nn.functional.leaky_relu(x, 0.2) ** 2,
    lambda x: torch.nn.functional.hardtanh(x * 2.0, -0.5, 0.5),
    lambda x: torch.nn.functional.elu(torch.nn.functional.softplus(x) - 1.0, 0.5).abs(),
    lambda x: torch.nn.functional.mish(x),
    lambda x: 2.0 ** torch.nn.functional.hardswish(x),
]


@pytest.mark.parametrize("chain", CHAINS)
def test_chains_compute_what_pytorch_computes(chain):
    expression = epilogue_expression(traced(chain))
    assert expression is not None
    x = torch.linspace(-4, 4, 101)
    assert torch.allclose(evaluate(expression, x), chain(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "chain",
    [
        lambda x: x + x,  # two tensor operands
        lambda x: x.sum(dim=1),  # a reduction
        lambda x: torch.div(x, 2.0, rounding_mode="floor"),  # rounding division
        lambda x: x**7,  # a large integer power of a possibly negative base
    ],
)
def test_what_cannot_be_an_expression_gives_none(chain):
    assert epilogue_expression(traced(chain)) is None


def test_empty_chain_gives_none():
    assert epilogue_expression([]) is None


def test_matches_no_builtin_problem():
    assert not {name for name in builtin_names() if FAMILY.match(load_problem(name))}


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("elementwise.flat_blocked", {}),
        ("elementwise.flat_blocked", {"BLOCK": 512, "num_warps": 2}),  # 2100 = 4 blocks + tail
        ("elementwise.persistent_grid_stride", {}),
        ("elementwise.persistent_grid_stride", {"BLOCK": 512, "programs_per_sm": 1}),
    ],
)
def test_unseen_gelu_gets_correct_candidates(name, params, tmp_path):
    gelu = load_problem(str(UNSEEN / "gelu.py"))
    match = FAMILY.match(gelu)
    assert match.facts["ops"] == ["gelu"]
    source = next(s for s in FAMILY.strategies if s.name == name).render(match, params)
    assert candidate_error(gelu, source, tmp_path) < 1e-5
