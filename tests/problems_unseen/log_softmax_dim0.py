"""Log-softmax over dim 0 (down the columns) of a (batch, features) tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=0)


SIZES = {"tiny": [dict(batch=12, features=40)], "full": [dict(batch=512, features=65536)]}


def get_inputs(batch=512, features=65536):
    return [torch.randn(batch, features)]


def get_init_inputs(**size):
    return []
