"""The whole-model family's convolutions (hints/model_kernels/conv.py) against torch on the
Triton interpreter: 1-D, 2-D and 3-D, plain and transposed, every geometry keyword, groups and
depthwise, channels-last input, the fused batch-norm/residual/activation epilogue and the
modules, each launch reaching only layout torch operators."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from model_kernels_checks import assert_matches, layout_only

from hints.model_kernels import conv

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
OURS = {
    F.conv1d: conv.kb_conv1d,
    F.conv2d: conv.kb_conv2d,
    F.conv3d: conv.kb_conv3d,
    F.conv_transpose1d: conv.kb_conv_transpose1d,
    F.conv_transpose2d: conv.kb_conv_transpose2d,
    F.conv_transpose3d: conv.kb_conv_transpose3d,
}
SPATIAL = {1: (9,), 2: (7, 6), 3: (5, 4, 5)}
ATOL = 1e-4  # fp32 sums of up to ~200 products of unit normals: observed errors ~1e-6


def inputs(nd, channels, out_channels, kernel, groups=1, transposed=False, bias=True):
    torch.manual_seed(nd * 100 + channels * 10 + out_channels)
    x = torch.randn(2, channels, *SPATIAL[nd])
    kernel = (kernel,) * nd if isinstance(kernel, int) else kernel
    shape = (channels, out_channels // groups) if transposed else (out_channels, channels // groups)
    return x, torch.randn(*shape, *kernel), torch.randn(out_channels) if bias else None


def check(torch_fn, x, w, b, *args, **kwargs):
    ours = layout_only(OURS[torch_fn], x, w, b, *args, **kwargs)
    assert_matches(ours, torch_fn(x, w, b, *args, **kwargs), atol=ATOL)


# (rank, in channels, out channels, kernel, keywords): 8 output channels per group take the
# tl.dot path, fewer the CUDA-core one.
CASES = [
    (1, 4, 8, 3, dict(stride=2, padding=1, dilation=2)),
    pytest.param(
        1,
        3,
        6,
        4,
        dict(padding="same", groups=3),  # odd total padding: one more at
        marks=pytest.mark.filterwarnings("ignore:Using padding='same'"),
    ),  # the end
    (2, 3, 8, 3, dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    (2, 6, 6, (3, 2), dict(padding="valid", groups=3)),
    (2, 6, 6, 3, dict(padding="same", dilation=2, groups=6)),  # depthwise
    (2, 4, 8, 3, dict(stride=2, padding=1, groups=4)),  # depthwise, two outputs per channel
    (2, 8, 16, 3, dict(padding=1, groups=2)),  # 8 per group: tl.dot
    (2, 5, 8, 1, dict()),  # pointwise
    # the interpreter's wide tiles: 360 of reduction (two steps of 256, the second partial) and
    # 80 output channels (a tile of 128, partly masked)
    (2, 40, 80, 3, dict(padding=1)),
    (3, 3, 8, (3, 2, 3), dict(stride=(1, 2, 2), padding=(1, 0, 1))),
    (3, 4, 4, 3, dict(padding=2, dilation=2, groups=4)),
]


@pytest.mark.parametrize("nd, channels, out_channels, kernel, kwargs", CASES)
def test_conv_matches_torch(nd, channels, out_channels, kernel, kwargs):
    x, w, b = inputs(nd, channels, out_channels, kernel, kwargs.get("groups", 1))
    check(CONV[nd], x, w, b, **kwargs)


def test_conv_without_bias_on_an_unbatched_input():
    x, w, _ = inputs(2, 3, 8, 3, bias=False)
    check(F.conv2d, x[0], w, None, padding=1)


@pytest.mark.parametrize("nd", [2, 3])
def test_conv_reads_channels_last_and_strided_inputs(nd):
    x, w, b = inputs(nd, 4, 8, 3)
    layout = torch.channels_last if nd == 2 else torch.channels_last_3d
    check(CONV[nd], x.to(memory_format=layout), w, b, padding=1)
    check(CONV[nd], x[..., ::2], w.transpose(0, 1).contiguous().transpose(0, 1), b)


TRANSPOSED_CASES = [
    (1, 4, 6, 3, dict(stride=2, padding=1, output_padding=1)),
    (1, 3, 8, 2, dict(stride=3)),  # fewer taps than the stride: some phases see bias alone
    (2, 4, 8, 3, dict(stride=2, padding=1, output_padding=1, groups=2)),
    (2, 4, 8, (3, 2), dict(stride=(2, 1), padding=(0, 1), dilation=2)),  # ungathered phases
    (2, 6, 6, 3, dict(stride=1, padding=1, groups=6)),  # depthwise
    (3, 3, 8, 3, dict(stride=2, padding=1, output_padding=1)),
    (3, 4, 4, 2, dict(stride=(1, 2, 2), output_padding=(0, 1, 0), groups=2)),
]


def to_tf32(t):
    """t rounded to TF32's 10 mantissa bits, to nearest (in float64, by its binary exponent)."""
    mantissa, exponent = torch.frexp(t.double())
    return torch.ldexp(torch.round(mantissa * 2.0**11), exponent - 11)


def test_tf32_convolutions_round_their_operands_to_nearest(monkeypatch):
    """KB_CONV_PRECISION "tf32" (cuDNN's precision at PyTorch's defaults) rounds each operand to
    nearest before its product, as cuDNN does: the tensor cores would truncate. The interpreter
    multiplies in fp32, so what it shows is the rounding: the result is the exact convolution of
    the rounded operands, 100x nearer it than the fp32 convolution is. The direct kernel (few
    channels a group) multiplies on CUDA cores, in fp32."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 16, 6, 6), torch.randn(32, 16, 3, 3)
    monkeypatch.setattr(conv, "KB_CONV_PRECISION", "tf32")
    ours = layout_only(conv.kb_conv2d, x, w, None, 1, 1).double()
    rounded = F.conv2d(to_tf32(x), to_tf32(w), None, 1, 1)
    nearest, exact = (
        (ours - rounded).abs().max(),
        (ours - F.conv2d(x.double(), w.double(), None, 1, 1)).abs().max(),
    )
    assert nearest < 1e-4 and exact > 100 * nearest
    depthwise = layout_only(conv.kb_conv2d, x, w[:16, :1], None, 1, 1, 1, 16)
    assert_matches(depthwise, F.conv2d(x, w[:16, :1], None, 1, 1, 1, 16), atol=ATOL)


@pytest.mark.parametrize("nd, channels, out_channels, kernel, kwargs", TRANSPOSED_CASES)
def test_conv_transpose_matches_torch(nd, channels, out_channels, kernel, kwargs):
    groups = kwargs.get("groups", 1)
    x, w, b = inputs(nd, channels, out_channels, kernel, groups, transposed=True)
    check(TRANSPOSED[nd], x, w, b, **kwargs)


def test_conv_transpose_reads_channels_last_without_bias():
    x, w, _ = inputs(2, 4, 8, 3, transposed=True, bias=False)
    check(F.conv_transpose2d, x.to(memory_format=torch.channels_last), w, None, stride=2)


def folded_batch_norm(channels):
    """An eval-mode BatchNorm with running statistics, and its scale and shift."""
    bn = nn.BatchNorm2d(channels).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return bn, scale.detach(), (bn.bias - bn.running_mean * scale).detach()


ACTIVATIONS = {
    "none": lambda y: y,
    "relu": F.relu,
    "relu6": F.relu6,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
}


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_fused_conv_batch_norm_activation(act):
    torch.manual_seed(1)
    module = nn.Conv2d(4, 8, 3, padding=1, bias=False)
    bn, scale, shift = folded_batch_norm(8)
    x = torch.randn(2, 4, 6, 7)
    ours = layout_only(conv.kb_conv_fused, x, module, scale, shift, act=act)
    with torch.no_grad():
        assert_matches(ours, ACTIVATIONS[act](bn(module(x))), atol=ATOL)


@pytest.mark.parametrize("groups", [1, 6])
def test_fused_conv_batch_norm_residual_relu(groups):
    """ResNet's tail: relu(bn(conv(x)) + identity), the identity channels-last."""
    torch.manual_seed(2)
    module = nn.Conv2d(6, 6, 3, padding=1, groups=groups)
    bn, scale, shift = folded_batch_norm(6)
    x = torch.randn(2, 6, 5, 6)
    identity = torch.randn(2, 6, 5, 6).to(memory_format=torch.channels_last)
    ours = layout_only(conv.kb_conv_fused, x, module, scale, shift, identity, "relu")
    with torch.no_grad():
        assert_matches(ours, F.relu(bn(module(x)) + identity), atol=ATOL)


def test_fused_transposed_conv_with_a_broadcast_residual():
    torch.manual_seed(3)
    module = nn.ConvTranspose1d(4, 8, 3, stride=2, padding=1, output_padding=1)
    x, residual = torch.randn(2, 4, 6), torch.randn(8, 1)
    ours = layout_only(conv.kb_conv_fused, x, module, residual=residual, act="silu")
    with torch.no_grad():
        assert_matches(ours, F.silu(module(x) + residual), atol=ATOL)


MODULES = [
    (conv.KbConv1d, nn.Conv1d, dict(in_channels=4, out_channels=8, kernel_size=3, stride=2)),
    (
        conv.KbConv2d,
        nn.Conv2d,
        dict(in_channels=6, out_channels=6, kernel_size=3, padding="same", groups=6, bias=False),
    ),
    (conv.KbConv3d, nn.Conv3d, dict(in_channels=3, out_channels=8, kernel_size=2, padding=1)),
    (
        conv.KbConvTranspose1d,
        nn.ConvTranspose1d,
        dict(in_channels=4, out_channels=6, kernel_size=3, stride=2),
    ),
    (
        conv.KbConvTranspose2d,
        nn.ConvTranspose2d,
        dict(in_channels=4, out_channels=8, kernel_size=2, stride=2, groups=2),
    ),
    (
        conv.KbConvTranspose3d,
        nn.ConvTranspose3d,
        dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1, output_padding=1),
    ),
]


@pytest.mark.parametrize("ours, theirs, kwargs", MODULES, ids=[m[0].__name__ for m in MODULES])
def test_module_matches_its_nn_counterpart(ours, theirs, kwargs):
    torch.manual_seed(4)
    reference = theirs(**kwargs)
    module = ours(**kwargs)
    module.load_state_dict(reference.state_dict())
    x = torch.randn(2, kwargs["in_channels"], *SPATIAL[len(reference.kernel_size)])
    with torch.no_grad():
        assert_matches(layout_only(module, x), reference(x), atol=ATOL)


def test_transposed_module_takes_an_output_size():
    torch.manual_seed(5)
    reference = nn.ConvTranspose2d(3, 4, 3, stride=2)
    module = conv.KbConvTranspose2d(3, 4, 3, stride=2)
    module.load_state_dict(reference.state_dict())
    x = torch.randn(2, 3, 4, 5)
    with torch.no_grad():
        assert_matches(layout_only(module, x, output_size=(10, 12)), reference(x, (10, 12)))


def test_unsupported_forms_say_what():
    x, w, b = inputs(2, 3, 8, 3)
    with pytest.raises(NotImplementedError, match="padding_mode='reflect'"):
        conv.KbConv2d(3, 8, 3, padding=1, padding_mode="reflect")(x)
    with pytest.raises(NotImplementedError, match="activation 'mish'"):
        conv.kb_conv_fused(x, nn.Conv2d(3, 8, 3), act="mish")
    with pytest.raises(NotImplementedError, match="padding='full'"):
        conv.kb_conv2d(x, w, b, padding="full")
    with pytest.raises(NotImplementedError, match="stride=\\(1, 2, 3\\)"):
        conv.kb_conv2d(x, w, b, stride=(1, 2, 3))
    with pytest.raises(ValueError, match="strided"):
        conv.kb_conv2d(x, w, b, stride=2, padding="same")


TWO_CONVS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.body = nn.Sequential(nn.ReLU(), nn.Conv2d(16, 8, 1))

    def forward(self, x):
        return self.body(self.stem(x))


def get_inputs():
    return [torch.randn(4, 3, 6, 6)]


def get_init_inputs():
    return []
"""


def test_the_layer_check_reports_every_convolution_at_every_plan(tmp_path, capsys):
    """engine.benchmarks.conv_layers, the GPU diagnosis of a model: each convolution on the input
    it gets inside the Model (the second's is the first's output after a ReLU), at every tile
    plan and precision, with its error against float64."""
    from engine.benchmarks import conv_layers

    (tmp_path / "two_convs.py").write_text(TWO_CONVS)
    conv_layers.main([str(tmp_path / "two_convs.py"), "--device", "cpu", "--batch", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * 3 * 3
    assert [line.split(":")[0] for line in lines] == ["stem"] * 9 + ["body.1"] * 9
    assert "Conv2d (16, 3, 3, 3) on (2, 3, 6, 6)" in lines[0]
    assert "Conv2d (8, 16, 1, 1) on (2, 16, 6, 6)" in lines[-1] and "large ieee" in lines[-1]
    errors = [(plan.endswith(" tf32"), float(rest.split()[0]))
              for plan, rest in (line.split(": error ") for line in lines)]  # fmt: skip
    assert max(e for tf32, e in errors if not tf32) < 1e-6
    assert max(e for tf32, e in errors if tf32) < 1e-3  # TF32's rounding
    assert (conv.KB_TILES, conv.KB_CONV_PRECISION) == ("base", "ieee")  # left as they were
