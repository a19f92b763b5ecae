import torch
import torch.nn as nn


class Model(nn.Module):
    """3D transposed convolution, 16 channels in and 24 out, stride 2, padding 1, output
    padding 1, dilation 2, with bias, then a scaling: gaps of the stride in every dim."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.ConvTranspose3d(
            in_channels, out_channels, 3, stride=2, padding=1, output_padding=1, dilation=2
        )

    def forward(self, x):
        return self.conv(x) * 0.5


batch_size = 1
in_channels = 16
out_channels = 24
size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, size, size, size)]


def get_init_inputs():
    return [in_channels, out_channels]
