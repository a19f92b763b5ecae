"""relu(Linear(x)) / 2.0 with bias, fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, divisor: float = 2.0):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) / self.divisor


SIZES = {
    "tiny": [dict(batch=8, in_features=48, out_features=40)],
    "small": [dict(batch=128, in_features=4096, out_features=4096)],
    "full": [
        dict(batch=1024, in_features=8192, out_features=8192),
        dict(batch=128, in_features=4096, out_features=4096),
    ],
}


# Normalized-error tolerance by the precision the candidate computes in (tl.dot on fp32 is tf32).
TOLERANCE = {"fp32": 1e-5, "tf32x3": 1e-5, "tf32": 2e-3}


def get_inputs(batch=1024, in_features=8192, **size):
    return [torch.randn(batch, in_features)]


def get_init_inputs(in_features=8192, out_features=8192, **size):
    return [in_features, out_features]
