"""Scaled dot-product attention (no mask, no dropout) on (B, H, S, D) tensors."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


SIZES = {
    "tiny": [dict(b=1, h=2, s=16, d=16, dtype="float32")],
    "small": [dict(b=16, h=16, s=512, d=64, dtype="float16")],
    "full": [
        dict(b=16, h=16, s=512, d=64, dtype="float16"),
        dict(b=16, h=16, s=2048, d=64, dtype="float16"),
        dict(b=8, h=16, s=4096, d=128, dtype="float16"),
        dict(b=32, h=32, s=512, d=64, dtype="float32"),
    ],
}


# Normalized-error tolerance by precision: fp16 sizes compute in fp16, the fp32 one may use tf32.
TOLERANCE = {"fp32": 1e-5, "tf32x3": 1e-5, "tf32": 2e-3, "fp16": 5e-3, "bf16": 3e-2}


def get_inputs(b=16, h=16, s=512, d=64, dtype="float16"):
    dt = getattr(torch, dtype)
    return [torch.randn(b, h, s, d, dtype=dt) for _ in range(3)]


def get_init_inputs(**size):
    return []
