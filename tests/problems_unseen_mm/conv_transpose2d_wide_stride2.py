import torch
import torch.nn as nn


class Model(nn.Module):
    """2D transposed convolution, 16 channels in and out, stride 2, padding 1, output padding
    1: each phase of the stride reads through its own subset of the 3x3 taps."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
channels = 16
size = 5


def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels]
