"""Grouped and depthwise convolution, 1D, 2D or 3D, plain or transposed (any kernel, stride,
padding, dilation, output padding), alone or chained (depthwise then pointwise), with a fused
elementwise epilogue: direct tiles, implicit GEMMs per group (flattened over channels and taps,
or tap by tap) and a depthwise stencil. Every
kernel sees three spatial dims (D, H, W); 1D and 2D tensors are views with leading dims of one.
A transposed convolution is computed as a gather: output o reads input i through tap k when
i * stride - padding + k * dilation = o."""

from __future__ import annotations

import math

from hints.base import Family, Match, Param, Strategy
from hints.conv_gemm import IMPLICIT_GEMM_TEMPLATE, TAP_GEMM_TEMPLATE
from hints.conv_geometry import match_chain, render_geometry
from hints.conv_templates import DEPTHWISE_TEMPLATE, DIRECT_TEMPLATE

PRECISIONS = ("ieee", "tf32x3", "tf32")  # fp32 on FMA units, near-fp32 on tensor cores, TF32
# tl.dot needs every tile side >= 16: below that a group's channels cannot feed tensor cores.
MIN_DOT_CHANNELS = 16
CIN_G, COUT_G, KERNEL = 8, 9, 10  # columns of a size row in the facts (KERNEL: its 3 sides)


def match(problem) -> Match | None:
    facts = match_chain(problem)
    return None if facts is None else Match("conv", facts)


def has_depthwise_size(match: Match) -> bool:
    return any(size[CIN_G] == 1 for size in match.facts["sizes"])


def has_few_channels_many_taps(match: Match) -> bool:
    """Whether, somewhere on the ladder, a group's GEMM has tl.dot-sized sides only when its
    reduction runs over input channels and taps together (3 channels x 11 x 11 taps in
    AlexNet's first convolution): its output channels, and channels x taps, but too few input
    channels to go tap by tap."""
    return any(
        size[CIN_G] < MIN_DOT_CHANNELS
        and size[CIN_G] * math.prod(size[KERNEL:]) >= MIN_DOT_CHANNELS
        and size[COUT_G] >= MIN_DOT_CHANNELS
        for size in match.facts["sizes"]
    )


def has_wide_channels(match: Match) -> bool:
    """Whether a group has tl.dot-sized input and output channels somewhere on the ladder."""
    return any(min(size[CIN_G], size[COUT_G]) >= MIN_DOT_CHANNELS for size in match.facts["sizes"])


def substitutions(match: Match) -> dict:
    return {"geometry": render_geometry(match.facts["geometry"]),
            "MIN_DOT_CHANNELS": MIN_DOT_CHANNELS}  # fmt: skip


TAP_GEMM_EXPLANATION = (
    "An implicit GEMM per group, tap by tap: for each (kd, kh, kw) the input positions that the "
    "tile's outputs read (and whether they exist) are computed once as vectors, then the "
    "reduction runs over the group's input channels in BLOCK_K slices of [BLOCK_P x BLOCK_K] "
    "input (K-major, as tensor cores read it) against [BLOCK_K x BLOCK_CO] weights with tl.dot, "
    "no division in the inner loop; the tile is stored along positions. fp32 inputs choose "
    "input_precision: ieee (fp32 on the FMA units), tf32x3 (near-fp32 on tensor cores) or tf32, "
    "its operands rounded to nearest once, as they are copied (what cuDNN computes a convolution "
    "in at PyTorch's defaults; named in the result). "
)

DIRECT_PARAMS = (
    Param("BLOCK_P", (64, 128, 256, 512, 1024), 256, tile=True),
    Param("BLOCK_CO", (4, 8, 16, 32, 64), 16, tile=True),
    Param("num_warps", (1, 2, 4, 8), 4),
)
# The implicit GEMMs' parameters; the direct kernel's are there for the sizes that fall back.
GEMM_PARAMS = (
    *DIRECT_PARAMS,
    Param("GEMM_BLOCK_P", (32, 64, 128, 256), 128, tile=True),
    Param("GEMM_BLOCK_CO", (16, 32, 64, 128), 64, tile=True),
    Param("BLOCK_K", (16, 32, 64), 32, tile=True),
    Param("gemm_num_warps", (2, 4, 8), 4),
    Param("num_stages", (1, 2, 3, 4), 3),
    Param("precision", PRECISIONS, "ieee"),
)


def tap_gemm_strategy(
    name: str, channels_last: bool, applies: str, addresses: tuple, layout: str
) -> Strategy:
    """The tap-by-tap implicit GEMM, reading its input channels-last or where it lies."""
    return Strategy(
        name=name,
        family="conv",
        applies=applies,
        addresses=addresses,
        explanation=TAP_GEMM_EXPLANATION + layout,
        template=TAP_GEMM_TEMPLATE,
        params=GEMM_PARAMS,
        applies_to=has_wide_channels,
        substitutions=lambda match: {**substitutions(match), "channels_last": channels_last},
        torch_precision="tf32",
    )


FAMILY = Family(
    name="conv",
    description="Grouped and depthwise convolution, 1D, 2D or 3D, plain or transposed (any "
    "kernel size, stride, padding, dilation, output padding), alone or depthwise then pointwise, "
    "with a fused elementwise epilogue.",
    match=match,
    strategies=(
        # The GEMMs first where they apply: a GEMM over channels x taps is what wide groups
        # want, and the direct kernel's unrolled taps are slow to interpret. Tap by tap where
        # a group has channels enough: its index math is per tap, not per element. Channels-last
        # first (a staged chain takes the first that applies): on the H200 it beat reading
        # NCDHW on all eight convolutions timed, 1.2x to 4.2x.
        tap_gemm_strategy(
            "conv.tap_gemm_channels_last",
            channels_last=True,
            applies=f"as conv.tap_gemm (at least {MIN_DOT_CHANNELS} input and output channels "
            "per group); pays where a tile's channels lie far apart, large volumes (copying the "
            "input costs a pass over it)",
            addresses=("compute-bound", "uncoalesced", "stall-memory", "cache-bound"),
            layout="It reads copies of the input as [N, D, H, W, C] and of the weights as [G, "
            "CO, taps, CI]: a tile's channels are contiguous, its loads coalesced. On the H200, "
            "70_conv_transposed_3D ran 1.88x eager so, against 0.72x from NCDHW.",
        ),
        tap_gemm_strategy(
            "conv.tap_gemm",
            channels_last=False,
            applies=f"at least {MIN_DOT_CHANNELS} input and output channels per group (other "
            "sizes fall back to the direct tile kernel)",
            addresses=("compute-bound", "under-utilised", "stall-memory"),
            layout="The input is read in its own layout (NCDHW): the channels of a tile lie "
            "D*H*W apart; no copy is made but the rounding one in tf32.",
        ),
        Strategy(
            name="conv.implicit_gemm",
            family="conv",
            applies=f"at least {MIN_DOT_CHANNELS} output channels per group and as many input "
            f"channels x taps, but fewer than {MIN_DOT_CHANNELS} input channels (wider groups go "
            "tap by tap; smaller ones fall back to the direct tile kernel)",
            addresses=("compute-bound", "occupancy-registers", "stall-memory"),
            explanation=(
                "Treat each group as a GEMM: M = output positions, N = the group's output "
                "channels, K = input channels x KD x KH x KW. Patches are gathered from the "
                "input on the fly (no im2col buffer; masked where a transposed convolution's "
                "stride skips) into [BLOCK_P x BLOCK_K] tiles, multiplied with tl.dot against "
                "the weight's [BLOCK_K x BLOCK_CO] slice. fp32 inputs "
                "choose input_precision: ieee (fp32 on the FMA units), tf32x3 (near-fp32 on "
                "tensor cores) or tf32, its operands rounded to nearest once, as they are "
                "copied (what cuDNN computes a convolution in at PyTorch's defaults; named in the "
                "result)."
            ),
            template=IMPLICIT_GEMM_TEMPLATE,
            params=GEMM_PARAMS,
            applies_to=has_few_channels_many_taps,
            substitutions=substitutions,
            torch_precision="tf32",
        ),
        Strategy(
            name="conv.direct_tiled",
            family="conv",
            applies="any grouped convolution, especially few channels per group",
            addresses=("compute-bound", "cache-bound", "multi-pass", "few-waves"),
            explanation=(
                "One program per (sample, group, block of output positions) computes a "
                "[BLOCK_CO x BLOCK_P] tile: for each input channel of the group and each "
                "(kd, kh, kw) tap it loads one run of input values (zero-padded by masks; for a "
                "transposed convolution, the positions the stride maps onto that output) and "
                "one weight per output channel, and does BLOCK_CO fp32 FMAs per value loaded. "
                "Strict fp32; bias and epilogue fused before the single store. BLOCK_CO is "
                "capped at the group's output channels at run time."
            ),
            template=DIRECT_TEMPLATE,
            params=DIRECT_PARAMS,
            substitutions=substitutions,
        ),
        Strategy(
            name="conv.depthwise_stencil",
            family="conv",
            applies="depthwise convolution (one input channel per group); other sizes of the "
            "ladder fall back to the direct tile kernel",
            addresses=("memory-bound", "uncoalesced", "cache-bound", "few-waves"),
            explanation=(
                "With one input channel per group there is no channel reduction: each program "
                "applies the KD x KH x KW stencil to a [BLOCK_H x BLOCK_W] tile of one output "
                "volume (rows flat over depth and height), taps unrolled at compile time, "
                "weights loaded as scalars, input rows read contiguously along W (the "
                "overlapping halo hits L1). The kernel is bound by reading the input and "
                "writing the output once."
            ),
            template=DEPTHWISE_TEMPLATE,
            params=(
                *DIRECT_PARAMS,
                Param("BLOCK_H", (2, 4, 8, 16, 32), 8, tile=True),
                Param("BLOCK_W", (16, 32, 64, 128), 64, tile=True),
                Param("dw_num_warps", (1, 2, 4, 8), 4),
            ),
            applies_to=has_depthwise_size,
            substitutions=substitutions,
        ),
    ),
)
