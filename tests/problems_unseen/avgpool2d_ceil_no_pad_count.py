"""Average pooling 2D in ceil mode, padding not counted in the divisor, asymmetric window."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d((3, 2), stride=(2, 3), padding=1, ceil_mode=True,
                                 count_include_pad=False)  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


SIZES = {"tiny": [dict(batch=2, side=11)], "full": [dict(batch=32, side=256)]}


def get_inputs(batch=32, side=256):
    return [torch.randn(batch, 8, side, side + 3)]


def get_init_inputs(**size):
    return []
