import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product followed by ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.relu(torch.bmm(A, B))


batch = 3
m = 20
k = 33
n = 17


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
