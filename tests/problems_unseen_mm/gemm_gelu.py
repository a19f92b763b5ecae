import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer followed by GELU."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()  # noqa: UP008 (KernelBench spells it so)
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = F.gelu(x)
        return x


batch_size = 12
in_features = 40
out_features = 24


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
