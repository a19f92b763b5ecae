"""A learned bias table read through an index buffer, as a Swin transformer reads its relative
position bias (`table[index.view(-1)]`): an integer tensor picks rows of a parameter."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, entries=16, heads=4, window=8):
        super().__init__()
        self.window = window
        self.table = nn.Parameter(torch.randn(entries, heads))
        self.register_buffer("index", torch.randint(0, entries, (window, window)))

    def forward(self, x):
        bias = self.table[self.index.view(-1)].view(self.window, self.window, -1)
        return x + torch.sigmoid(bias.permute(2, 0, 1))


SIZES = {
    "tiny": [dict(batch=2)],
    "full": [dict(batch=256)],
}


def get_inputs(batch=256, heads=4, window=8):
    return [torch.randn(batch, heads, window, window)]


def get_init_inputs(**size):
    return []
