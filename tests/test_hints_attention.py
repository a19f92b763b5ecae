"""The attention hint family: matching from traced calls, and the flash-attention candidates
correct on the CPU interpreter (fp32 and fp16, plain and causal)."""

import pytest
from hints_checks import candidate_error, problem

from engine.problems import builtin_names
from hints import match_problem
from hints.attention import FAMILY

FLASH = FAMILY.strategies[0]
STRICT = 1e-5
FP16 = 2e-3  # fp16 rounding of the inputs to P @ V and of the output


def test_matches_only_the_sdpa_problem_among_builtins():
    matched = {name for name in builtin_names() if FAMILY.match(problem(name))}
    assert matched == {"sdpa"}
    assert "attention" in [family.name for family, _ in match_problem(problem("sdpa"))]


def test_sdpa_facts_come_from_the_trace():
    facts = FAMILY.match(problem("sdpa")).facts
    assert facts["causal"] is False
    assert facts["scale_expr"] == "q.shape[-1] ** -0.5"
    assert ["full", "float16", 8, 16, 4096, 128, 4096, 128] in facts["sizes"]


POINTS = [
    {},
    {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2},
    {"BLOCK_M": 32, "BLOCK_N": 16, "precision": "tf32x3"},
]


@pytest.mark.parametrize("params", POINTS)
def test_flash_points_are_correct_on_the_tiny_size(params, tmp_path):
    sdpa = problem("sdpa")
    assert candidate_error(sdpa, FLASH.render(FAMILY.match(sdpa), params), tmp_path) < STRICT


@pytest.mark.parametrize(
    "size",
    [dict(b=1, h=2, s=40, d=16, dtype="float16"), dict(b=1, h=1, s=24, d=24, dtype="float32")],
    ids=["fp16", "ragged-head-dim"],
)
def test_flash_on_other_dtypes_and_head_dims(size, tmp_path):
    sdpa = problem("sdpa")
    source = FLASH.render(FAMILY.match(sdpa), {"BLOCK_M": 16, "BLOCK_N": 32})
    tolerance = FP16 if size["dtype"] == "float16" else STRICT
    assert candidate_error(sdpa, source, tmp_path, size) < tolerance


@pytest.mark.parametrize("params", [{}, {"BLOCK_M": 16, "BLOCK_N": 16}, {"BLOCK_M": 32}])
def test_unseen_causal_attention(params, tmp_path):
    causal = problem("causal_attention_d32.py")
    match = FAMILY.match(causal)
    assert match.facts["causal"] is True
    assert candidate_error(causal, FLASH.render(match, params), tmp_path) < STRICT


def test_given_scale_and_masks(tmp_path):
    source = problem("causal_attention_d32.py").path.read_text()
    scaled = tmp_path / "scaled_attention.py"
    scaled.write_text(source.replace("is_causal=True", "scale=0.3"))
    match = FAMILY.match(problem(str(scaled)))
    assert (match.facts["causal"], match.facts["scale_expr"]) == (False, "0.3")
    assert candidate_error(problem(str(scaled)), FLASH.render(match), tmp_path) < STRICT
    masked = tmp_path / "masked_attention.py"
    masked.write_text(source.replace("is_causal=True", "attn_mask=query[..., :1] > 0"))
    assert FAMILY.match(problem(str(masked))) is None
