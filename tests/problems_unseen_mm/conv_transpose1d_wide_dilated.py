import torch
import torch.nn as nn


class Model(nn.Module):
    """1D transposed convolution, 16 channels in and 32 out, stride 1, padding 2, dilation 3."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, 5, padding=2, dilation=3)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 16
out_channels = 32
length = 9


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels]
