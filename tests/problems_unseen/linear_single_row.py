"""One row through a linear layer with bias: x (1, K) @ W^T + b, a matrix-vector product."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


SIZES = {
    "tiny": [dict(in_features=300, out_features=9)],
    "full": [dict(in_features=65536, out_features=16384)],
}


def get_inputs(in_features=65536, **size):
    return [torch.randn(1, in_features)]


def get_init_inputs(in_features=65536, out_features=16384):
    return [in_features, out_features]
