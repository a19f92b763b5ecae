"""The attention hint family: matching from traced calls, the flash-attention candidates correct
on the CPU interpreter (fp32 and fp16, plain and causal) and fitted to the H200's shared memory
for wide heads, and the staged GEMM-softmax-GEMM candidates for wide fp32 heads."""

import itertools
import random
from pathlib import Path

import pytest
from hints_checks import candidate_error, problem, strategy
from sm90 import compiled_for_sm90

from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.problems import builtin_names, load_problem
from hints import match_problem
from hints.attention import FAMILY, flash_shared_bytes, flash_tiles
from hints.base import H200_SHARED_BYTES

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


# KernelBench's 97: fp32 heads of 1024 values, too wide for a flash tile in shared memory.
WIDE = Path(__file__).parent / "problems_kernelbench/sample/level1/97_ScaledDotProductAttention.py"
STAGED = strategy(FAMILY, "attention.staged_gemm_softmax")


def wide_size(**globals_):
    return {"module_globals": {"batch_size": 1, "num_heads": 2, "sequence_length": 40,
                               "embedding_dimension": 300, **globals_}}  # fmt: skip


def test_wide_fp32_heads_get_the_staged_strategy_and_narrow_ones_do_not():
    wide = load_problem(str(WIDE), "strict")
    assert STAGED.applies_to(FAMILY.match(wide))
    assert not STAGED.applies_to(FAMILY.match(problem("sdpa")))  # fp16, 128 values
    assert not STAGED.applies_to(FAMILY.match(problem("causal_attention_d32.py")))
    proposals = OfflineGenerator(wide, "cpu").propose(
        GenerationRequest(wide, "coarse", 0, random.Random(0))
    )
    assert [p.origin for p in proposals.proposals] == [FLASH.name, STAGED.name]


def test_every_flash_point_fits_shared_memory_at_the_full_size():
    """Any point of the flash grid, rendered for 97, asks for at most an H200's shared memory
    at 97's full size (1024 fp32 values a head), and its source runs the fitted tiles."""
    match = FAMILY.match(load_problem(str(WIDE), "strict"))
    assert ["full", "float32", 32, 32, 512, 1024, 512, 1024] in match.facts["sizes"]
    grid = [p for p in FLASH.params if p.tile or p.name == "num_stages"]
    for values in itertools.product(*(p.values for p in grid)):
        tiles = flash_tiles(
            match, {**FLASH.defaults(), **dict(zip([p.name for p in grid], values, strict=True))}
        )
        assert flash_shared_bytes(tiles, 1024, 4) <= H200_SHARED_BYTES, tiles
    fitted = flash_tiles(match, FLASH.defaults())
    assert fitted != FLASH.defaults()  # the defaults alone ask for about 2.5 MB
    source = FLASH.render(match)
    assert f"BLOCK_M={fitted['BLOCK_M']}, BLOCK_N={fitted['BLOCK_N']}" in source
    assert f"num_stages={fitted['num_stages']}" in source


def test_narrow_heads_keep_the_flash_defaults():
    sdpa = FAMILY.match(problem("sdpa"))
    assert flash_tiles(sdpa, FLASH.defaults()) == FLASH.defaults()


def test_flash_default_for_wide_heads_compiles_within_the_h200s_shared_memory(tmp_path):
    """The sm_90 compile of 97's default flash kernel at its full-size tiles (the head dim in
    chunks of HEAD_BLOCK): the shared memory it asks for stays under the H200's limit and under
    flash_shared_bytes' bound."""
    match = FAMILY.match(load_problem(str(WIDE), "strict"))
    tiles = flash_tiles(match, {**FLASH.defaults(), "precision": "tf32x3"})
    path = tmp_path / "candidate.py"
    path.write_text(FLASH.render(match, tiles))
    rows = {"q": "m", "k": "n", "v": "n", "o": "m"}
    scalars = ["SQ", "SK", "D", "DV"] + [
        f"stride_{t}{a}" for t, r in rows.items() for a in f"b{r}d"
    ]
    signature = {**dict.fromkeys(("q_ptr", "k_ptr", "v_ptr", "o_ptr"), "*fp32"),
                 "qk_scale": "fp32", **dict.fromkeys(scalars, "i32")}  # fmt: skip
    chunk = tiles["HEAD_BLOCK"]
    constants = {"CAUSAL": False, "Q_RESIDENT": False, "EVEN_D": True,
                 "BLOCK_M": tiles["BLOCK_M"], "BLOCK_N": tiles["BLOCK_N"], "BLOCK_D": chunk,
                 "BLOCK_DV": chunk}  # fmt: skip
    signature.update(dict.fromkeys(constants, "constexpr"))
    compiled = compiled_for_sm90(path, "attention_kernel", signature, constants,
                                 tiles["num_warps"], tiles["num_stages"])  # fmt: skip
    assert 0 < compiled["shared"] <= flash_shared_bytes(tiles, 1024, 4) <= H200_SHARED_BYTES


@pytest.mark.parametrize("name", [FLASH.name, STAGED.name])
def test_wide_heads_pass_the_gate_at_a_derived_size(name, tmp_path):
    """300 values a head: flash in chunks of its head dim (the last one ragged), and staged."""
    wide = load_problem(str(WIDE), "strict")
    source = strategy(FAMILY, name).render(FAMILY.match(wide), {"precision": "tf32x3"})
    assert candidate_error(wide, source, tmp_path, wide_size()) < STRICT


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_staged_on_the_tiny_size_and_causal(precision, tmp_path):
    wide = load_problem(str(WIDE), "strict")
    source = STAGED.render(FAMILY.match(wide), {"precision": precision})
    assert candidate_error(wide, source, tmp_path) < STRICT
    causal = problem("causal_attention_d32.py")
    params = {"precision": precision, "SOFTMAX_BLOCK": 512}
    assert candidate_error(causal, STAGED.render(FAMILY.match(causal), params), tmp_path) < STRICT
