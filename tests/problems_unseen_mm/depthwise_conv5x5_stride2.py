import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution, 5x5 kernel, stride 2, with bias."""

    def __init__(self, in_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels,
            in_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            groups=in_channels,
            bias=True,
        )

    def forward(self, x):
        return self.conv2d(x)


batch_size = 2
in_channels = 3
height = 13
width = 11
kernel_size = 5
stride = 2
padding = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, kernel_size, stride, padding]
