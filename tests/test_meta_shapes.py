"""Operators that PyTorch runs on the meta device by a decomposition in Python: a whole model's
trace (loading, sizing, matching) runs torch.lstm, torch.gru, torch.rnn_* and torch.batch_norm by
their output shapes, the ones PyTorch's own meta run gives, instead of that run (seconds per
recurrence at KernelBench's sizes, 17 ms per batch norm)."""

import pytest
import torch
from meta_calls import Passed

from engine.problems.trace import MetaShapes, on_meta_device

LAYERS = [
    ("LSTM", {}),
    ("LSTM", {"bidirectional": True, "batch_first": True}),
    ("LSTM", {"proj_size": 3}),
    ("GRU", {"bidirectional": True}),
    ("GRU", {"batch_first": True, "bias": False}),
    ("RNN", {"nonlinearity": "relu", "bidirectional": True}),
    ("RNN", {}),
]


def run_on_meta(layer: torch.nn.Module, x: torch.Tensor, *state):
    out = layer(x, *state)
    return [t.shape for t in (out[0], *(out[1] if isinstance(out[1], tuple) else (out[1],)))]


@pytest.mark.parametrize("kind, options", LAYERS)
@pytest.mark.parametrize("batched", [True, False])
def test_shapes_are_pytorchs_own(kind, options, batched):
    layer = getattr(torch.nn, kind)(5, 4, 2, **options).to("meta")
    x = torch.empty((3, 6, 5) if batched else (6, 5), device="meta")
    expected = run_on_meta(layer, x)
    with Passed() as passed, on_meta_device():
        assert run_on_meta(layer, x) == expected
    assert not {"lstm", "gru", "rnn_tanh", "rnn_relu"} & set(passed.ops)


def test_an_explicit_initial_state_and_a_packed_sequence():
    """Given states keep their shapes; a packed sequence takes PyTorch's own path."""
    layer = torch.nn.LSTM(5, 4, 2, bidirectional=True).to("meta")
    x, h = torch.empty(6, 3, 5, device="meta"), torch.empty(4, 3, 4, device="meta")
    with MetaShapes():
        assert run_on_meta(layer, x, (h, h)) == [(6, 3, 8), (4, 3, 4), (4, 3, 4)]
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(6, 3, 5), [6, 4, 2])
    cpu = torch.nn.LSTM(5, 4, 2)
    with MetaShapes():
        out, _ = cpu(packed)
    assert out.data.shape == (12, 4) and not out.data.is_meta


def test_real_tensors_are_computed():
    layer = torch.nn.GRU(5, 4)
    x = torch.randn(6, 3, 5)
    with MetaShapes():
        out, hidden = layer(x)
    torch.testing.assert_close(out, layer(x)[0])
    assert hidden.shape == (1, 3, 4)


@pytest.mark.parametrize("shape, channels_last", [((4, 3), False), ((2, 3, 5, 5), True),
                                                   ((2, 3, 4, 4, 4), False)])  # fmt: skip
@pytest.mark.parametrize("training", [True, False])
def test_a_batch_norm_keeps_its_input_shape_and_layout(shape, channels_last, training):
    kind = {2: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d, 5: torch.nn.BatchNorm3d}[len(shape)]
    norm = kind(3).to("meta").train(training)
    x = torch.empty(shape, device="meta")
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    expected = norm(x)
    with Passed() as passed, on_meta_device():
        out = norm(x)
    assert "batch_norm" not in passed.ops
    assert (out.shape, out.stride(), out.dtype) == (expected.shape, expected.stride(), x.dtype)


def test_shapes_that_do_not_fit_still_fail_as_pytorchs_own_do():
    """Sizing tries cuts on meta: a batch norm whose channels are not the input's, one that trains
    on a single value per channel, or a recurrence fed the wrong width must fail there too."""
    norm = torch.nn.BatchNorm2d(4).to("meta")
    with on_meta_device(), pytest.raises(RuntimeError):
        norm(torch.empty(2, 3, 5, 5))
    with on_meta_device(), pytest.raises(ValueError, match="more than 1 value per channel"):
        norm(torch.empty(1, 4, 1, 1))
    lstm = torch.nn.LSTM(5, 4).to("meta")
    x, h = torch.empty(6, 3, 7, device="meta"), torch.empty(1, 3, 4, device="meta")
    with on_meta_device(), pytest.raises(RuntimeError):
        torch.lstm(x, (h, h), lstm._flat_weights, True, 1, 0.0, False, False, False)
