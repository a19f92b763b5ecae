import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, sigmoid, then scaling by a constant factor."""

    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.linear(x)
        x = torch.sigmoid(x)
        x = x * self.scaling_factor
        return x


batch_size = 20
input_size = 36
hidden_size = 52
scaling_factor = 1.5


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
