"""The whole-model family's pooling (hints/model_kernels/pooling.py) against torch on the Triton
interpreter: max, average and adaptive pooling in 1-D, 2-D and 3-D with every option (indices,
ceil mode, padding counted or not, a divisor, None output sizes), channels-last and unbatched
inputs, and the modules, each launch reaching only layout torch operators."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from model_kernels_checks import assert_matches, layout_only

from hints.model_kernels import pooling

SPATIAL = {1: (9,), 2: (7, 8), 3: (5, 6, 5)}


def sample(nd, channels=3):
    torch.manual_seed(nd)
    return torch.randn(2, channels, *SPATIAL[nd])


def check(ours, theirs, x, *args, **kwargs):
    assert_matches(layout_only(ours, x, *args, **kwargs), theirs(x, *args, **kwargs))


MAX = {1: (pooling.kb_max_pool1d, F.max_pool1d), 2: (pooling.kb_max_pool2d, F.max_pool2d),
       3: (pooling.kb_max_pool3d, F.max_pool3d)}  # fmt: skip
AVG = {1: (pooling.kb_avg_pool1d, F.avg_pool1d), 2: (pooling.kb_avg_pool2d, F.avg_pool2d),
       3: (pooling.kb_avg_pool3d, F.avg_pool3d)}  # fmt: skip
ADAPTIVE_AVG = {1: (pooling.kb_adaptive_avg_pool1d, F.adaptive_avg_pool1d),
                2: (pooling.kb_adaptive_avg_pool2d, F.adaptive_avg_pool2d),
                3: (pooling.kb_adaptive_avg_pool3d, F.adaptive_avg_pool3d)}  # fmt: skip
ADAPTIVE_MAX = {1: (pooling.kb_adaptive_max_pool1d, F.adaptive_max_pool1d),
                2: (pooling.kb_adaptive_max_pool2d, F.adaptive_max_pool2d),
                3: (pooling.kb_adaptive_max_pool3d, F.adaptive_max_pool3d)}  # fmt: skip

MAX_CASES = [
    (1, dict(kernel_size=3, stride=2, padding=1, return_indices=True)),
    (1, dict(kernel_size=2, dilation=3, ceil_mode=True)),
    (2, dict(kernel_size=3, stride=2, ceil_mode=True, return_indices=True)),  # GoogleNet's
    (2, dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1))),
    (2, dict(kernel_size=2)),
    (3, dict(kernel_size=2, stride=2, padding=1, ceil_mode=True, return_indices=True)),
    (3, dict(kernel_size=(3, 2, 2), stride=1, dilation=(1, 2, 1))),
]


@pytest.mark.parametrize("nd, kwargs", MAX_CASES)
def test_max_pool_matches_torch(nd, kwargs):
    check(*MAX[nd], sample(nd), **kwargs)


def test_max_pool_indices_take_the_first_of_ties():
    x = torch.tensor([[[1.0, 3.0, 3.0, 2.0, 2.0, 0.0]]])
    check(*MAX[1], x, 3, stride=1, return_indices=True)


AVG_CASES = [
    (1, dict(kernel_size=3, stride=2, padding=1)),
    (1, dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    (2, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (2, dict(kernel_size=(3, 2), padding=(1, 1), count_include_pad=False)),
    (2, dict(kernel_size=2, divisor_override=3)),
    (3, dict(kernel_size=2, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    (3, dict(kernel_size=3, stride=(1, 2, 2), divisor_override=5)),
]


@pytest.mark.parametrize("nd, kwargs", AVG_CASES)
def test_avg_pool_matches_torch(nd, kwargs):
    check(*AVG[nd], sample(nd), **kwargs)


@pytest.mark.parametrize(
    "nd, output_size", [(1, 4), (1, 1), (2, (3, None)), (2, 1), (3, (2, 4, None)), (3, 1)]
)
def test_adaptive_avg_pool_matches_torch(nd, output_size):
    check(*ADAPTIVE_AVG[nd], sample(nd), output_size)


@pytest.mark.parametrize("nd, output_size", [(1, 5), (2, (4, 3)), (2, (None, 1)), (3, 2)])
def test_adaptive_max_pool_matches_torch_with_indices(nd, output_size):
    check(*ADAPTIVE_MAX[nd], sample(nd), output_size, return_indices=True)


def test_global_pooling_of_a_plane_larger_than_a_step():
    """More window elements than one step of the kernel reduces (a global pool of 48 x 48)."""
    x = torch.randn(2, 3, 48, 48)
    check(*ADAPTIVE_AVG[2], x, 1)
    check(*ADAPTIVE_MAX[2], x, 1, return_indices=True)


def test_pooling_reads_channels_last_strided_and_unbatched_inputs():
    x = sample(2, channels=4)
    channels_last = x.to(memory_format=torch.channels_last)
    check(*MAX[2], channels_last, 3, 2, 1, return_indices=True)
    check(*AVG[2], x[..., ::2], 2, count_include_pad=False, padding=1)
    check(*ADAPTIVE_AVG[2], channels_last, (2, 3))
    check(*MAX[1], sample(1)[0], 3, 2, 1, return_indices=True)
    check(*AVG[3], sample(3)[0], 2)


MODULES = [
    (pooling.KbMaxPool1d, nn.MaxPool1d, dict(kernel_size=3, stride=2, return_indices=True)),
    (pooling.KbMaxPool2d, nn.MaxPool2d, dict(kernel_size=3, stride=2, padding=1)),
    (pooling.KbMaxPool3d, nn.MaxPool3d, dict(kernel_size=2, ceil_mode=True)),
    (pooling.KbAvgPool1d, nn.AvgPool1d, dict(kernel_size=3, padding=1, count_include_pad=False)),
    (pooling.KbAvgPool2d, nn.AvgPool2d, dict(kernel_size=2, stride=2, divisor_override=3)),
    (pooling.KbAvgPool3d, nn.AvgPool3d, dict(kernel_size=2, stride=1, ceil_mode=True)),
    (pooling.KbAdaptiveAvgPool1d, nn.AdaptiveAvgPool1d, dict(output_size=1)),
    (pooling.KbAdaptiveAvgPool2d, nn.AdaptiveAvgPool2d, dict(output_size=(1, 1))),
    (pooling.KbAdaptiveAvgPool3d, nn.AdaptiveAvgPool3d, dict(output_size=(None, 2, 3))),
    (pooling.KbAdaptiveMaxPool1d, nn.AdaptiveMaxPool1d, dict(output_size=4)),
    (pooling.KbAdaptiveMaxPool2d, nn.AdaptiveMaxPool2d, dict(output_size=3, return_indices=True)),
    (pooling.KbAdaptiveMaxPool3d, nn.AdaptiveMaxPool3d, dict(output_size=(2, 3, 2))),
]


@pytest.mark.parametrize("ours, theirs, kwargs", MODULES, ids=[m[0].__name__ for m in MODULES])
def test_module_matches_its_nn_counterpart(ours, theirs, kwargs):
    x = sample(int(theirs.__name__[-2]))
    assert_matches(layout_only(ours(**kwargs), x), theirs(**kwargs)(x))


def test_unsupported_forms_say_what():
    x = sample(2)
    with pytest.raises(ValueError, match="more than half"):
        pooling.kb_max_pool2d(x, 2, padding=2)
    with pytest.raises(NotImplementedError, match="kernel_size=\\(2, 2, 2\\)"):
        pooling.kb_avg_pool2d(x, (2, 2, 2))
    with pytest.raises(NotImplementedError, match="output_size=\\(1, 1, 1\\)"):
        pooling.kb_adaptive_avg_pool2d(x, (1, 1, 1))
    with pytest.raises(NotImplementedError, match="input of 5 dims"):
        pooling.kb_max_pool2d(sample(3), 2)
