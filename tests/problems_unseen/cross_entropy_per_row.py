"""Cross-entropy per row (reduction none) of a module's logits over an odd class count."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(reduction="none")

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(logits, labels)


SIZES = {
    "tiny": [dict(rows=9, classes=1000)],
    "full": [dict(rows=16384, classes=1000)],
}


def get_inputs(rows=16384, classes=1000):
    return [torch.randn(rows, classes), torch.randint(0, classes, (rows,))]


def get_init_inputs(**size):
    return []
