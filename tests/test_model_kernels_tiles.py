"""The kernel library's two tile plans (hints/model_kernels): on cpu tensors (Triton's
interpreter) a launcher takes tiles of up to KB_INTERPRETER_TILE elements, which the other
kernel tests run; on a GPU it takes its usual small ones. Here the GPU's plan runs in the
interpreter too, on shapes that give its programs several tiles each way (blocks of positions,
of flat outputs across planes, of the reduction, split reductions), and the interpreter's plan
on shapes big enough for several of its own wide programs."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from model_kernels_checks import assert_matches, layout_only

from hints.model_kernels import common, conv, elementwise, matmul, pooling, recurrent, reductions

MODULES = (conv, elementwise, matmul, pooling, recurrent, reductions)


@pytest.fixture
def gpu_tiles(monkeypatch):
    """Every launcher plans its tiles as on a GPU."""
    for module in MODULES:
        monkeypatch.setattr(module, "kb_interpreted", lambda t: False)


def conv_bn_relu_residual(groups, out_channels, size):
    torch.manual_seed(groups)
    module = nn.Conv2d(6, out_channels, 3, padding=1, groups=groups).eval()
    x = torch.randn(2, 6, size, size)
    residual = torch.randn(2, out_channels, size, size)
    scale, shift = torch.rand(out_channels) + 0.5, torch.randn(out_channels)
    ours = layout_only(conv.kb_conv_fused, x, module, scale, shift, residual, "relu")
    with torch.no_grad():
        theirs = F.relu(module(x) * scale[:, None, None] + shift[:, None, None] + residual)
    assert_matches(ours, theirs, atol=1e-4)


@pytest.mark.parametrize("groups, out_channels", [(1, 16), (6, 12)], ids=["dot", "depthwise"])
def test_convolutions_at_the_gpus_tiles(gpu_tiles, groups, out_channels):
    conv_bn_relu_residual(groups, out_channels, 12)  # 144 positions: 3 blocks of 64


def test_a_transposed_convolution_at_the_gpus_tiles(gpu_tiles):
    torch.manual_seed(0)
    x, w = torch.randn(2, 16, 9, 9), torch.randn(16, 8, 3, 3)
    ours = layout_only(conv.kb_conv_transpose2d, x, w, None, 2, 1, 1)
    assert_matches(ours, F.conv_transpose2d(x, w, None, 2, 1, 1), atol=1e-4)


def test_pooling_at_the_gpus_tiles(gpu_tiles):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 20, 20)  # 600 outputs of 4-wide windows: 2 programs across planes
    ours = layout_only(pooling.kb_max_pool2d, x, 2, 2, return_indices=True)
    assert_matches(ours, F.max_pool2d(x, 2, 2, return_indices=True))
    planes = torch.randn(2, 40, 7, 7)  # 80 global windows of 49: 32 planes a program
    assert_matches(
        layout_only(pooling.kb_adaptive_avg_pool2d, planes, 1), F.adaptive_avg_pool2d(planes, 1)
    )


def test_elementwise_matmul_and_reductions_at_the_gpus_tiles(gpu_tiles):
    torch.manual_seed(0)
    x = torch.randn(3000)
    assert_matches(layout_only(elementwise.kb_relu, x), F.relu(x))
    a, b = torch.randn(100, 70), torch.randn(70, 200)
    assert_matches(layout_only(matmul.kb_matmul, a, b), a @ b, atol=1e-4)
    rows = torch.randn(2, 4096 * 40)  # two long rows: a split reduction
    assert_matches(layout_only(reductions.kb_sum, rows, 1), rows.sum(1), atol=1e-3)
    assert_matches(layout_only(reductions.kb_softmax, rows[:, :5000], 1), rows[:, :5000].softmax(1))


@pytest.mark.parametrize("tiles", ["small", "base", "large"])
def test_every_tile_plan_of_the_products(gpu_tiles, monkeypatch, tiles):
    """Each KB_TILES plan, the search's tile parameter: output channels past one program's tile
    (136 of them), positions past one block (144), a depthwise layer's flat outputs, and a
    product wider than one tile each way."""
    for module in (conv, matmul):
        monkeypatch.setattr(module, "KB_TILES", tiles)
    widest = {"small": 32, "base": 64, "large": 128}[tiles]
    assert conv._conv_tiles(136, 54, 144, interpreted=False)[:2] == (widest, widest)
    assert matmul._matmul_config(300, 300, 70, interpreted=False)["BLOCK_N"] == 2 * widest
    conv_bn_relu_residual(1, 136, 12)
    conv_bn_relu_residual(6, 12, 12)
    torch.manual_seed(0)
    a, b = torch.randn(300, 70), torch.randn(70, 300)
    assert_matches(layout_only(matmul.kb_matmul, a, b), a @ b, atol=1e-4)


@pytest.mark.parametrize(
    "kind, tiles", [("LSTM", "small"), ("LSTM", "base"), ("LSTM", "large"), ("GRU", "small"),
                    ("RNN", "base")],
)  # fmt: skip
def test_recurrent_layers_at_the_gpus_tiles(gpu_tiles, monkeypatch, kind, tiles):
    """The sequence kernel with a GPU plan: 70 hidden units span three unit tiles (small), two
    (base) or one (large) that a step walks before its barrier, 40 batch rows two programs, two
    directions, every time step in one launch."""
    monkeypatch.setattr(recurrent, "KB_TILES", tiles)
    block_b, block_h, *_, spread = recurrent._recurrent_sequence_tiles(40, 70, 2, torch.empty(0))
    assert (block_b, block_h, spread) == (32, {"small": 32, "base": 64, "large": 128}[tiles], False)
    torch_cls = getattr(nn, kind)
    torch.manual_seed(0)
    theirs = torch_cls(6, 70, bidirectional=True).eval()
    ours = getattr(recurrent, f"Kb{kind}")(6, 70, bidirectional=True).eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 40, 6)
    with torch.no_grad():
        expected = theirs(x)
    assert_matches(layout_only(ours, x), expected, atol=1e-5)


@pytest.mark.parametrize(("multiprocessors", "spread"), [(132, True), (11, False)])
def test_spread_recurrent_steps_only_where_every_program_fits(gpu_tiles, monkeypatch,
                                                              multiprocessors, spread):  # fmt: skip
    """Under KB_RECURRENT "spread" the programs of a step wait on one another, so all must be on
    the GPU at once: 70 units in tiles of 32 (3), 40 rows in blocks of 32 (2), two directions make
    12 programs; on a GPU of fewer multiprocessors one program per rows walks every unit."""
    monkeypatch.setattr(recurrent, "KB_RECURRENT", "spread")
    monkeypatch.setattr(recurrent, "_recurrent_multiprocessors", lambda device: multiprocessors)
    block_b, block_h, *_, spreads = recurrent._recurrent_sequence_tiles(40, 70, 2, torch.empty(0))
    assert (block_b, block_h, spreads) == (32, 32 if spread else 64, spread)


def test_spread_programs_that_wait_in_vain_give_up_with_a_wrong_answer(gpu_tiles, monkeypatch):
    """Spread programs that are not all on the GPU at once wait for one another forever, but for
    the spin limit: past it they go on, and the answer is wrong (the gate refuses it) rather than
    a hang. The interpreter runs one program at a time, as such a GPU would."""
    monkeypatch.setattr(recurrent, "KB_RECURRENT", "spread")
    monkeypatch.setattr(recurrent, "_recurrent_multiprocessors", lambda device: 132)
    monkeypatch.setattr(recurrent, "_recurrent_SPIN_LIMIT", 2)
    torch.manual_seed(0)
    theirs = nn.GRU(6, 70).eval()
    ours = recurrent.KbGRU(6, 70).eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 4, 6)
    with torch.no_grad():
        assert not torch.allclose(ours(x)[0], theirs(x)[0], atol=1e-3)


def test_the_compile_box_plans_spread_steps_as_a_gpu_that_holds_them(monkeypatch):
    """On meta tensors (the compile box, no GPU to ask) a spread plan is compiled as planned."""
    monkeypatch.setattr(recurrent, "KB_RECURRENT", "spread")
    *_, spread = recurrent._recurrent_sequence_tiles(40, 70, 2, torch.empty(0, device="meta"))
    assert spread


def test_the_interpreters_wide_tiles_span_several_programs():
    """Outputs past one wide program land where they belong."""
    assert common.KB_INTERPRETER_TILE == 1 << 17  # the counts below assume it
    conv_bn_relu_residual(6, 12, 64)  # 98304 outputs, 16-wide reduction: 12 programs
    x = torch.randn(2, 64, 64, 64)  # the pool: 4 programs; the relu: 4
    assert_matches(layout_only(pooling.kb_max_pool2d, x, 2, 2), F.max_pool2d(x, 2, 2))
    assert_matches(layout_only(elementwise.kb_relu, x), F.relu(x))
