"""L2 normalization over dim 1, written out by hand: x / sqrt(sum(x * x))."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x / torch.sqrt(torch.sum(x * x, dim=1, keepdim=True))


SIZES = {"tiny": [dict(batch=4, dim=96)], "full": [dict(batch=16, dim=65536)]}


def get_inputs(batch=16, dim=65536):
    return [torch.randn(batch, dim)]


def get_init_inputs(**size):
    return []
