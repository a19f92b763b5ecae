"""The prompt builder: what the model is told, deterministically."""

from __future__ import annotations

import random

import pytest

import hints
from engine.generate.base import GenerationRequest, ParentInfo
from engine.generate.prompt import (
    MAX_FAILURES,
    MAX_RULE_HINTS,
    build_prompt,
    diagnosis_tags,
    prompt_sha256,
    select_strategies,
    strategy_section,
)
from engine.problems import load_problem
from hints.base import Family, Match, Strategy

# The shape engine.profiler.diagnosis produces for a memory-bound kernel with too few programs.
DIAGNOSIS = {
    "status": "ok",
    "kind": "memory-bound",
    "summary": "DRAM throughput is near its ceiling: only moving fewer bytes helps.",
    "evidence": [
        "DRAM throughput 84.6% of peak, 4.07 TB/s",
        "grid of 19 blocks fills 0.14 of one wave (132 SMs x 8 blocks per SM): some SMs sit idle",
    ],
    "tags": ["memory-bound", "few-waves", "stall-memory"],
    "metrics": {"dram_pct": 84.6},
    "stalls": [["long_scoreboard", 0.62], ["barrier", 0.11]],
    "rule_hints": [
        {
            "rule": f"Rule{i}",
            "type": "OPT",
            "text": f"hint number {i}",
            "estimated_speedup": 50.0 - i,
        }
        for i in range(MAX_RULE_HINTS + 2)
    ],
    "missing_metrics": [],
}


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


@pytest.fixture(scope="module")
def linear():
    return load_problem("linear_relu_div")


def parent(source="# the parent kernel\n", diagnosis=DIAGNOSIS) -> ParentInfo:
    return ParentInfo(
        id="c0007",
        source=source,
        origin="reduction.online_single_pass",
        params={},
        measurements=[
            {"rung": 0, "speedup": 1.5, "speedup_ci": [1.4, 1.61], "cv": 0.021, "per_shape": {}},
            {
                "rung": 1,
                "speedup": 1.25,
                "speedup_ci": [1.2, 1.3],
                "cv": 0.01,
                "per_shape": {"full0": 1.1, "full1": 1.42},
            },
        ],
        diagnosis=diagnosis,
    )


def request(problem, **fields) -> GenerationRequest:
    fields = {"kind": "mutate", "count": 2, "rng": random.Random(0), **fields}
    return GenerationRequest(problem=problem, **fields)


def user_text(messages: list[dict]) -> str:
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_the_same_request_gives_the_same_messages_and_hash(softmax):
    first = build_prompt(request(softmax, parent=parent()))
    again = build_prompt(request(softmax, parent=parent(), rng=random.Random(99)))
    assert first == again
    assert prompt_sha256(first) == prompt_sha256(again)
    other = build_prompt(request(softmax, parent=parent(source="# another kernel\n")))
    assert prompt_sha256(other) != prompt_sha256(first)


def test_the_problem_and_the_output_contract_are_stated(linear):
    text = user_text(build_prompt(request(linear)))
    assert linear.source.strip() in text
    assert "- tiny (tiny): batch=8, in_features=48, out_features=40 -> [8, 40] float32" in text
    assert (
        "`def __init__(self, in_features: int, out_features: int, divisor: float=2.0)` and "
        "`def forward(self, x: torch.Tensor) -> torch.Tensor`" in text
    )
    assert (
        f"never calls the PyTorch operators being replaced ({', '.join(linear.replaces)})" in text
    )
    assert "imports nothing beyond torch, triton and math" in text
    assert "exactly one ```python block" in text
    assert "It has not been profiled" not in text  # no parent: nothing about one


def test_the_output_contract_states_the_precision_policy():
    strict = user_text(build_prompt(request(load_problem("linear_relu_div"))))
    assert 'passes `input_precision="ieee"` or `"tf32x3"` (plain TF32 fails a GEMM)' in strict
    tf32_problem = load_problem("linear_relu_div", "tf32")
    tf32 = user_text(build_prompt(request(tf32_problem)))
    assert "as this session's precision policy is tf32" in tf32 and "plain TF32 fails" not in tf32


def test_the_parent_its_measurements_and_its_diagnosis_are_given(softmax):
    text = user_text(build_prompt(request(softmax, parent=parent())))
    assert "candidate c0007 (from reduction.online_single_pass)" in text
    assert "# the parent kernel" in text
    assert "- rung 0: 1.5x (95% interval 1.4x to 1.61x), run-to-run variation 2.1%" in text
    assert (
        "- rung 1: 1.25x (95% interval 1.2x to 1.3x), run-to-run variation 1.0%; "
        "per shape: full0 1.1, full1 1.42" in text
    )
    assert "Profiler diagnosis: memory-bound. DRAM throughput is near its ceiling" in text
    assert "- grid of 19 blocks fills 0.14 of one wave" in text
    assert "Top warp stalls: long_scoreboard 62%, barrier 11%" in text
    shown = [i for i in range(MAX_RULE_HINTS + 2) if f"hint number {i}" in text]
    assert shown == list(range(MAX_RULE_HINTS))  # the top ones only
    assert "- Rule0: hint number 0 (ncu estimates up to 50% of the time)" in text


def test_an_unprofiled_parent_says_why(softmax):
    unavailable = {"status": "unavailable", "why": "ncu is not installed", "gpu_seconds": 0.0}
    text = user_text(build_prompt(request(softmax, parent=parent(diagnosis=unavailable))))
    assert "It could not be profiled: ncu is not installed." in text
    assert "It has not been profiled yet." in user_text(
        build_prompt(request(softmax, parent=parent(diagnosis=None)))
    )


def test_failures_and_slower_siblings_are_listed(softmax):
    failures = [
        {"id": f"c{i:04d}", "reason": "wrong_output", "message": f"error {i} " + "x" * 1000}
        for i in range(MAX_FAILURES + 3)
    ]
    siblings = [
        {"id": "c0020", "speedup": 0.8, "source": "# sibling twenty\n"},
        {"id": "c0021", "speedup": 0.9, "source": "# sibling twenty-one\n"},
        {"id": "c0022", "speedup": 0.95, "source": "# sibling twenty-two\n"},
    ]
    text = user_text(build_prompt(request(softmax, failures=failures, slower_siblings=siblings)))
    assert "## What did not work before" in text
    listed = [f["id"] for f in failures if f"candidate {f['id']} rejected (wrong_output)" in text]
    assert listed == [f["id"] for f in failures[-MAX_FAILURES:]]  # the most recent ones
    assert "x" * 1000 not in text and " ..." in text  # long messages are clipped
    assert "- candidate c0020 was slower: 0.8x" in text
    assert "# sibling twenty\n" not in text  # only the last two in full
    assert "# sibling twenty-one" in text and "# sibling twenty-two" in text


def strategy(name: str, addresses: tuple[str, ...], applies=lambda match: True) -> Strategy:
    return Strategy(
        name=f"reduction.{name}",
        family="reduction",
        applies="a row reduction",
        addresses=addresses,
        explanation=f"explanation of {name}",
        template="",
        applies_to=applies,
    )


FAMILY = Family(
    name="reduction",
    description="row and axis reductions",
    match=lambda problem: None,
    strategies=(
        strategy("tiling", ("under-utilised",)),
        strategy("vector_width", ("uncoalesced",)),
        strategy("split_rows", ("few-waves", "under-utilised")),
        strategy("never", ("few-waves",), applies=lambda match: False),
        strategy("online", ("memory-bound", "multi-pass")),
    ),
)
MATCH = Match(
    family="reduction",
    facts={
        "op": "softmax",
        "dims": [1],
        "init_source": "def __init__(self):\n",
        "views": [[4, 300]],
    },
)


def test_strategies_addressing_the_diagnosis_come_first():
    tags = diagnosis_tags(DIAGNOSIS)
    assert tags == {"memory-bound", "few-waves", "stall-memory"}
    chosen = [s.name.split(".")[1] for s in select_strategies([(FAMILY, MATCH)], tags)]
    assert chosen == ["split_rows", "online", "tiling", "vector_width"]  # "never" does not apply
    assert len(select_strategies([(FAMILY, MATCH)], tags, limit=1)) == 1
    plain_order = [s.name.split(".")[1] for s in select_strategies([(FAMILY, MATCH)], frozenset())]
    assert plain_order == ["tiling", "vector_width", "split_rows", "online"]


def test_the_strategy_section_names_the_family_and_explains_each_strategy():
    text = strategy_section([(FAMILY, MATCH)], diagnosis_tags(DIAGNOSIS))
    assert "Recognised as reduction (op=softmax, dims=[1]): row and axis reductions" in text
    assert (
        "- reduction.split_rows [addresses the diagnosed few-waves]: explanation of split_rows "
        "(Applies when a row reduction.)" in text
    )
    assert strategy_section([], frozenset()) == ""


def test_the_hint_library_feeds_the_prompt(softmax):
    matches = hints.match_problem(softmax)
    text = user_text(build_prompt(request(softmax, parent=parent())))
    chosen = select_strategies(matches, diagnosis_tags(DIAGNOSIS))
    assert ("## Expert strategies that fit this problem" in text) == bool(chosen)
    assert all(f"- {s.name}" in text for s in chosen)
