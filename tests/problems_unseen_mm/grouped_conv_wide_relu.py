import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped 3x3 convolution with 32 channels per group, dilation 2, then ReLU."""

    def __init__(self, in_channels, out_channels, groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=2, dilation=2, groups=groups)

    def forward(self, x):
        return torch.relu(self.conv(x))


batch_size = 1
in_channels = 64
out_channels = 64
groups = 2
size = 5


def get_inputs():
    return [torch.randn(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels, groups]
