"""Recurrent layers on the meta device: a whole model's trace (loading, sizing, matching) runs
torch.lstm, torch.gru and torch.rnn_* by their output shapes, the ones PyTorch's own step-by-step
meta run gives, instead of that run (seconds per call at KernelBench's sizes)."""

import pytest
import torch

from engine.problems.trace import MetaRecurrences, on_meta_device

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
    with on_meta_device():
        assert run_on_meta(layer, x) == expected


def test_an_explicit_initial_state_and_a_packed_sequence():
    """Given states keep their shapes; a packed sequence takes PyTorch's own path."""
    layer = torch.nn.LSTM(5, 4, 2, bidirectional=True).to("meta")
    x, h = torch.empty(6, 3, 5, device="meta"), torch.empty(4, 3, 4, device="meta")
    with MetaRecurrences():
        assert run_on_meta(layer, x, (h, h)) == [(6, 3, 8), (4, 3, 4), (4, 3, 4)]
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(6, 3, 5), [6, 4, 2])
    cpu = torch.nn.LSTM(5, 4, 2)
    with MetaRecurrences():
        out, _ = cpu(packed)
    assert out.data.shape == (12, 4) and not out.data.is_meta


def test_real_tensors_are_computed():
    layer = torch.nn.GRU(5, 4)
    x = torch.randn(6, 3, 5)
    with MetaRecurrences():
        out, hidden = layer(x)
    torch.testing.assert_close(out, layer(x)[0])
    assert hidden.shape == (1, 3, 4)
