"""The offline expert generator finds candidates that pass the real policy gate (a worker
subprocess, the Triton interpreter) for every built-in problem, and for problems of known
families that it has no special case for."""

import random
from dataclasses import replace
from pathlib import Path

import pytest

import hints
from engine.backends.local import LocalBackend
from engine.gate.precision import infer_precision
from engine.generate.base import GenerationRequest, GeneratorError, ParentInfo
from engine.generate.offline import OfflineGenerator
from engine.problems import builtin_names, load_problem
from hints.core.binding import bind
from hints.core.dataflow import trace_graph

TESTS = Path(__file__).parent
UNSEEN = [
    TESTS / "problems_unseen" / "layernorm.py",  # reductions
    TESTS / "problems_unseen_mm" / "gemm_gelu.py",  # matrix products with an epilogue
    TESTS / "problems_unseen_mm" / "depthwise_conv5x5_stride2.py",  # convolutions
]


@pytest.fixture(scope="module")
def cpu():
    backend = LocalBackend("cpu")
    yield backend
    backend.close()


def coarse(problem):
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    return OfflineGenerator(problem).propose(request).proposals


def first_passing(cpu, problem):
    verdicts = []
    for proposal in coarse(problem):
        result = cpu.check(problem, proposal.source)
        verdicts.append((proposal.origin, result.reason, result.message[:200]))
        if result.passed:
            return proposal.origin
    pytest.fail(f"no coarse candidate of {problem.name} passes the gate: {verdicts}")


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_problem_gets_a_gate_passing_candidate(cpu, name):
    assert first_passing(cpu, load_problem(name))


@pytest.mark.parametrize("path", UNSEEN, ids=lambda p: p.stem)
def test_unseen_problem_of_a_known_family_gets_a_gate_passing_candidate(cpu, path):
    assert first_passing(cpu, load_problem(str(path)))


def test_coarse_round_is_one_candidate_per_applicable_strategy():
    problem = load_problem("softmax")
    proposals = coarse(problem)
    assert len({p.origin for p in proposals}) == len(proposals) >= 2


def test_a_problem_is_matched_once_per_process():
    """A session's generator matches at its creation and again at its start: the second is the
    first's matches; the same file under another policy, or a problem posed with other sizes,
    is matched anew."""
    problem = load_problem("rmsnorm")
    first = hints.match_problem(problem)
    assert [m for _, m in hints.match_problem(problem)] == [m for _, m in first]
    assert all(a is b for (_, a), (_, b) in zip(hints.match_problem(problem), first, strict=True))
    tf32 = load_problem("rmsnorm", "tf32")
    assert all(a is not b for (_, a), (_, b) in zip(hints.match_problem(tf32), first, strict=True))
    tiny = replace(problem, sizes=problem.tier("tiny"))
    assert hints.match_problem(tiny)[0][1] is not first[0][1]


def test_a_problem_is_traced_and_bound_once_per_size():
    """Every family asks for the reference's dataflow and binding: each is built on the meta
    device once per problem source and size (an LSTM's trace takes seconds)."""
    problem = load_problem("rmsnorm")
    smallest, largest = problem.sizes[0], problem.sizes[-1]
    graph = trace_graph(problem, smallest)
    assert trace_graph(problem, smallest) is graph and trace_graph(problem) is graph
    assert trace_graph(problem, largest).leaves[0][1] != graph.leaves[0][1]
    assert bind(problem) is bind(problem)
    edited = replace(problem, source=problem.source + "\n# edited\n")
    assert trace_graph(edited, smallest) is not graph
    assert trace_graph(edited, smallest) == graph


def test_mutations_follow_the_diagnosis_and_are_deterministic():
    problem = load_problem("rmsnorm")
    parent_proposal = coarse(problem)[0]
    parent = ParentInfo(
        "c0001",
        parent_proposal.source,
        parent_proposal.origin,
        parent_proposal.params,
        [],
        {"tags": ["register-spills"]},
    )

    def mutate(seed):
        request = GenerationRequest(problem, "mutate", 3, random.Random(seed), parent=parent)
        return OfflineGenerator(problem).propose(request).proposals

    first = mutate(7)
    assert [p.source for p in first] == [p.source for p in mutate(7)]
    assert first and all(p.source != parent.source for p in first)
    assert any("smaller" in p.note for p in first), [p.note for p in first]


def test_problem_of_no_family_is_refused_with_advice(tmp_path):
    odd = tmp_path / "sort.py"
    odd.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.sort(x, dim=1).values\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    with pytest.raises(GeneratorError, match="--generator llm"):
        OfflineGenerator(load_problem(str(odd))).preflight()


def test_precision_policy_bounds_the_precisions_proposed():
    def proposals(policy, parent=None):
        problem = load_problem("linear_relu_div", policy)
        kind, count = ("mutate", 12) if parent else ("coarse", 0)
        request = GenerationRequest(problem, kind, count, random.Random(5), parent=parent)
        return OfflineGenerator(problem).propose(request).proposals

    def neighbour_precisions(policy, coarse):
        top = coarse[0]
        parent = ParentInfo("c0001", top.source, top.origin, top.params, [], None)
        return {p.params["precision"] for p in proposals(policy, parent)}

    # strict judges by measured error: tf32x3 first (it passes on merit), ieee its neighbour,
    # never plain TF32 on a GEMM (it fails on merit)
    strict = proposals("strict")
    assert strict and {p.params["precision"] for p in strict} == {"tf32x3"}
    assert {infer_precision(p.source) for p in strict} == {"tf32x3"}
    assert neighbour_precisions("strict", strict) == {"tf32x3", "ieee"}
    tf32 = proposals("tf32")
    assert tf32 and {p.params["precision"] for p in tf32} == {"tf32"}
    assert {infer_precision(p.source) for p in tf32} == {"tf32"}
    assert neighbour_precisions("tf32", tf32) == {"tf32", "tf32x3"}  # one step from tf32


def test_strict_offers_tf32_where_pytorch_computes_in_tf32():
    """cuDNN convolutions run in TF32 at PyTorch's defaults, so under strict a TF32 convolution
    is judged against TF32's error: it is proposed there, and never on a GEMM."""

    def precisions_on(problem, backend="cuda") -> set[str]:
        generator = OfflineGenerator(problem, backend)
        return {
            v
            for strategy, _ in generator.applicable
            for p in strategy.params
            if p.name == "precision"
            for v in p.values
        }

    conv = load_problem(
        str(
            TESTS
            / "problems_kernelbench"
            / "level1"
            / "50_conv_standard_2D__square_input__square_kernel.py"
        )
    )
    implicit = [s for s, _ in OfflineGenerator(conv).applicable if s.name == "conv.implicit_gemm"]
    assert implicit and implicit[0].torch_precision == "tf32"
    assert precisions_on(conv) == {"tf32x3", "tf32", "ieee"}
    assert precisions_on(load_problem("linear_relu_div")) == {"tf32x3", "ieee"}
    # the coarse round tries such a strategy in tf32 (rounded) and in tf32x3 (sure to pass)
    request = GenerationRequest(conv, "coarse", 0, random.Random(0))
    coarse = OfflineGenerator(conv).propose(request).proposals
    tried = [p.params["precision"] for p in coarse if p.origin == "conv.implicit_gemm"]
    assert tried == ["tf32", "tf32x3"]
    # ... and every other applicable strategy still gets its turn
    assert {p.origin for p in coarse} == {s.name for s, _ in OfflineGenerator(conv).applicable}
    assert [infer_precision(p.source) for p in coarse if p.origin == "conv.implicit_gemm"] == tried
    # on the cpu, PyTorch's convolutions are fp32: nothing in tf32 there
    assert precisions_on(conv, "cpu") == {"tf32x3", "ieee"}


def test_a_staged_chain_computes_its_products_at_the_policys_precision():
    """A chain's GEMM stage takes the chain's precision: tf32x3 first under strict."""
    path = TESTS / "problems_kernelbench" / "level2" / "37_Matmul_Swish_Sum_GroupNorm.py"
    for policy, expected in (("strict", "tf32x3"), ("tf32", "tf32")):
        problem = load_problem(str(path), policy)
        request = GenerationRequest(problem, "coarse", 0, random.Random(0))
        (chain,) = OfflineGenerator(problem).propose(request).proposals
        assert chain.origin == "staged.chain"
        assert chain.params == {"precision": expected}
        assert infer_precision(chain.source) == expected  # from the stage's tl.dot


def test_a_chain_of_a_convolution_and_what_follows_is_proposed_in_tf32_under_strict():
    """PyTorch computes the chain's convolution in TF32 (cuDNN's default), so under strict the
    chain's precision may be TF32, as a convolution's alone: the coarse round proposes it in
    tf32 and in tf32x3. A chain whose product PyTorch computes in fp32 never gets TF32 (above),
    and on the cpu, where PyTorch's convolutions are fp32, neither does this one."""
    path = TESTS / "problems_kernelbench" / "sample" / "level2" / "43_Conv3d_Max_LogSumExp_ReLU.py"
    problem = load_problem(str(path))
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    chains = OfflineGenerator(problem, "cuda").propose(request).proposals
    assert [(c.origin, c.params["precision"]) for c in chains] == [
        ("staged.chain", "tf32"), ("staged.chain", "tf32x3")]  # fmt: skip
    assert [infer_precision(c.source) for c in chains] == ["tf32", "tf32x3"]
    on_cpu = OfflineGenerator(problem, "cpu").propose(request).proposals
    assert [c.params["precision"] for c in on_cpu] == ["tf32x3"]


def test_a_whole_model_is_searched_over_its_tile_plans_as_well_as_its_precision():
    """A model's one rewrite is no dead end after its first evaluation: its neighbours move the
    products' tile plan (KB_TILES) as well as the precision, and a diagnosis of spills asks for
    the smaller plan first."""
    problem = load_problem(str(TESTS / "problems_kernelbench" / "level3" / "1_MLP.py"))
    first = coarse(problem)[0]
    assert first.origin == "model.rewrite" and first.params == {"precision": "tf32x3",
                                                                  "tiles": "base",
                                                                  "graphs": "on"}  # fmt: skip

    def mutate(diagnosis):
        parent = ParentInfo("c0001", first.source, first.origin, first.params, [], diagnosis)
        request = GenerationRequest(problem, "mutate", 12, random.Random(3), parent=parent)
        return OfflineGenerator(problem).propose(request).proposals

    neighbours = mutate(None)
    assert {p.params["tiles"] for p in neighbours} == {"small", "base", "large"}
    assert {p.params["precision"] for p in neighbours} == {"tf32x3", "ieee"}
    assert {f"KB_TILES = '{p.params['tiles']}'" in p.source for p in neighbours} == {True}
    spilling = mutate({"tags": ["register-spills"]})
    assert spilling[0].params["tiles"] == "small" and "smaller tiles" in spilling[0].note


def test_a_whole_models_first_round_on_a_gpu_and_on_the_cpu():
    """On a GPU under strict a model's convolutions start in TF32, as PyTorch's (cuDNN's) do, with
    tf32x3 beside (sure to pass) and its other products in tf32x3 throughout; and a tile plan that
    the GPU's compiler gets wrong must not end the search at its first candidate, so the small
    plan comes too. The interpreter's reference is fp32 and it runs every plan alike: on the cpu,
    the default alone, without TF32. A model without convolutions has no conv_precision; one
    with a recurrent layer starts on a GPU with its steps spread over programs, one program
    walking them beside, and one without has no such parameter. On a GPU every model starts
    from its forward replayed as a CUDA graph (its launches' host work paid once), with forward
    as written beside; on the cpu it never does."""
    level3 = TESTS / "problems_kernelbench" / "level3"
    resnet = load_problem(str(level3 / "8_ResNetBasicBlock.py"))
    request = GenerationRequest(resnet, "coarse", 0, random.Random(0))
    on_gpu = OfflineGenerator(resnet, backend="cuda").propose(request).proposals
    assert [(p.params["conv_precision"], p.params["tiles"], p.params["graphs"])
            for p in on_gpu] == [("tf32", "base", "on"), ("tf32x3", "base", "on"),
                                 ("tf32", "small", "on"), ("tf32", "base", "off")]  # fmt: skip
    assert "return kb_graphed(self, super().forward, x)" in on_gpu[0].source
    assert "kb_graphed" not in on_gpu[3].source
    assert {p.params["precision"] for p in on_gpu} == {"tf32x3"}
    assert "KB_CONV_PRECISION = 'tf32'" in on_gpu[0].source
    assert "KB_TILES = 'small'" in on_gpu[2].source
    assert infer_precision(on_gpu[0].source) == "tf32"  # named in the results
    assert infer_precision(on_gpu[1].source) == "tf32x3"
    (on_cpu,) = OfflineGenerator(resnet, backend="cpu").propose(request).proposals
    assert (on_cpu.params["conv_precision"], on_cpu.params["precision"]) == ("tf32x3", "tf32x3")
    assert on_cpu.params["graphs"] == "off"
    mlp = load_problem(str(level3 / "1_MLP.py"))
    request = GenerationRequest(mlp, "coarse", 0, random.Random(0))
    proposals = OfflineGenerator(mlp, backend="cuda").propose(request).proposals
    assert [(p.params["tiles"], p.params["graphs"]) for p in proposals] == [
        ("base", "on"), ("small", "on"), ("base", "off")]  # fmt: skip
    assert all("conv_precision" not in p.params for p in proposals)
    assert not any("recurrent" in p.params for p in [*on_gpu, on_cpu, *proposals])
    gru = load_problem(str(level3 / "39_GRU.py"))
    request = GenerationRequest(gru, "coarse", 0, random.Random(0))
    proposals = OfflineGenerator(gru, backend="cuda").propose(request).proposals
    assert [(p.params["recurrent"], p.params["tiles"], p.params["graphs"]) for p in proposals] == [
        ("spread", "base", "on"), ("spread", "small", "on"), ("single", "base", "on"),
        ("spread", "base", "off")]  # fmt: skip
    assert "KB_RECURRENT = 'spread'" in proposals[0].source
    assert "KB_RECURRENT = 'single'" in proposals[2].source
    (on_cpu,) = OfflineGenerator(gru, backend="cpu").propose(request).proposals
    assert on_cpu.params["recurrent"] == "single"
