"""The float64 reference of Models whose forward reaches float32 tensors that `.to(float64)` on a
copy does not convert: modules closed over by a lambda (KernelBench's minGPT MLP), tensors made
in forward (an LSTM's initial state)."""

import torch
import torch.nn.functional as F
from torch import nn

from engine.gate.correctness import reference_float64

X = torch.randn(3, 8)
ONES = torch.ones(8, 8)


class ClosedOverLayer(nn.Module):
    def __init__(self):
        super().__init__()
        fc = self.fc = nn.Linear(8, 8)
        self.mlp = lambda x: fc(x).relu()  # a copy of the Model still calls the original's fc

    def forward(self, x):
        return self.mlp(x)


class MakesFloat32InForward(nn.Module):
    def forward(self, x):
        return F.linear(x, torch.ones(8, 8))


class WritesItsState(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.zeros(8)  # not a buffer: `.to(float64)` leaves it float32

    def forward(self, x):
        y = F.linear(x, torch.ones(8, 8))
        self.state.copy_(x[0])
        return y + self.state


def test_a_layer_closed_over_by_a_lambda_is_computed_in_float64():
    model = ClosedOverLayer()
    (ref,) = reference_float64(model, [X])
    w, b = model.fc.weight.double(), model.fc.bias.double()
    assert ref.dtype == torch.float64 and torch.equal(ref, F.linear(X.double(), w, b).relu())
    assert model.fc.weight.dtype == torch.float32  # the judge's own Model is left as it was


def test_a_tensor_made_in_forward_is_taken_in_float64():
    (ref,) = reference_float64(MakesFloat32InForward(), [X])
    assert torch.equal(ref, X.double() @ ONES.double().T)


def test_a_write_into_a_float32_tensor_lands():
    (ref,) = reference_float64(WritesItsState(), [X])
    expected = X.double() @ ONES.double().T + X[0].double()
    assert torch.allclose(ref, expected, rtol=0, atol=1e-6)  # the state holds x[0] in float32
