"""A correct RMS norm over the channels of (N, C, H, W): one program per (n, block of pixels)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, C, HW, eps, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    n = tl.program_id(0)
    pix = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    ch = tl.arange(0, BLOCK_C)
    mask = (ch[:, None] < C) & (pix[None, :] < HW)
    offs = n * C * HW + ch[:, None] * HW + pix[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / C + eps)
    tl.store(y_ptr + offs, x / rms[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, h, w = x.shape
        block_p = 32
        grid = (n, triton.cdiv(h * w, block_p))
        rmsnorm_kernel[grid](
            x, y, c, h * w, self.eps, BLOCK_C=triton.next_power_of_2(c), BLOCK_P=block_p
        )
        return y
