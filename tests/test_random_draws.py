"""A Model that draws random numbers in forward (KernelBench level 3's LSTM draws its initial
state with torch.randn on every call): the trace says so, every call of the Model and of a
candidate starts from one seed in the real cpu judge, so a rewrite that draws the same numbers
passes the check and its timed calls' checks, and a candidate may draw only where the Model
does, and only the same numbers."""

import random
from pathlib import Path

import pytest

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.jobs import EvalJob, RungSpec
from engine.problems import load_problem

UNSEEN = Path(__file__).parent / "problems_unseen"


def rewrite(problem) -> str:
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    return OfflineGenerator(problem).propose(request).proposals[0].source


def drawing_first(source: str) -> str:
    """The candidate with one random draw of its own at the start of ModelNew.forward."""
    head, forward, body = source.rpartition("    def forward(self, x):\n")
    return head + forward + "        torch.randn(1)\n" + body


@pytest.fixture(scope="module")
def noisy():
    return load_problem(str(UNSEEN / "noisy_linear.py"))


def test_the_trace_finds_the_draws(noisy):
    assert noisy.draws_random
    assert not load_problem(str(UNSEEN / "relu_below_zero.py")).draws_random


def test_a_rewrite_that_draws_alike_passes_the_check_and_its_timing(backend, noisy):
    kernel = rewrite(noisy)
    assert "torch.randn(" in kernel
    result = backend.check(noisy, kernel)
    assert result.passed, result.message
    # PyTorch's own float32 and float64 calls drew alike too: the bound is fp32's, not noise's
    assert result.tolerance < 1e-5
    job = EvalJob("n1", kernel, RungSpec(0, ("full",), 1, 4, input_sets=2), 5)
    timed = backend.evaluate(noisy, job)
    assert timed.passed, timed.message


def test_a_candidate_that_draws_other_numbers_is_wrong(backend, noisy):
    result = backend.check(noisy, drawing_first(rewrite(noisy)))
    assert result.reason == "wrong_output", result.message


def test_a_candidate_may_not_draw_where_the_model_does_not(backend):
    problem = load_problem(str(UNSEEN / "relu_below_zero.py"))
    result = backend.check(problem, drawing_first(rewrite(problem)))
    assert result.reason == "torch_compute", result.message
    assert "`randn`" in result.message
