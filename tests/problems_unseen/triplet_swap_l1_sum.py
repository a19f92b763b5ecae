"""Triplet margin loss with the L1 distance, swap and a summed reduction, over rows of an odd
length that take several chunks."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(
            anchor, positive, negative, margin=0.5, p=1, swap=True, reduction="sum"
        )


SIZES = {
    "tiny": [dict(rows=7, dim=2500)],
    "full": [dict(rows=8192, dim=4096)],
}


def get_inputs(rows=8192, dim=4096):
    return [torch.randn(rows, dim), torch.randn(rows, dim), torch.randn(rows, dim)]


def get_init_inputs(**size):
    return []
