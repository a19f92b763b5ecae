"""A product with a weight parameter ([K, N], no bias), tanh and a scale, log_softmax over the
last dim, then a scale: short rows that one program can own."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) / in_features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(torch.matmul(x, self.weight)) * 3.0
        return torch.log_softmax(y, dim=-1) * 0.5


SIZES = {
    "tiny": [dict(batch=37, in_features=50, out_features=40)],
    "full": [dict(batch=8192, in_features=1024, out_features=512)],
}


def get_inputs(batch=8192, in_features=1024, out_features=512):
    return [torch.randn(batch, in_features)]


def get_init_inputs(in_features=1024, out_features=512, **size):
    return [in_features, out_features]
