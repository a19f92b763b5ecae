"""Spins forever inside the kernel: timeout. The loop is carried by data (`spin` grows to inf
and inf == inf), so neither Triton's compiler nor LLVM can prove it endless and drop it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    spin = tl.load(x_ptr + row * n_cols)
    while spin == spin:
        spin = spin * 1.0000001 + 1.0
    x = x + spin * 0.0
    tl.store(y_ptr + row * n_cols + offs, x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
