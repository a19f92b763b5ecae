"""A small residual convolution block: conv, batch norm and ReLU in a Sequential, then a conv
and a batch norm written as statements, a residual add and a ReLU (both runs fuse in eval
mode), then a linear layer over the channels with its activation at every position."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        x = self.stem(x)
        out = self.conv(x)
        out = self.bn(out)
        out += x
        out = F.relu(out)
        return torch.tanh(self.head(out.permute(0, 2, 3, 1)))


SIZES = {
    "tiny": [dict(batch=2, channels=8, size=8)],
    "full": [dict(batch=32, channels=64, size=56)],
}


def get_inputs(batch=32, channels=64, size=56):
    return [torch.randn(batch, 3, size, size)]


def get_init_inputs(batch=32, channels=64, size=56):
    return [channels, 10]
