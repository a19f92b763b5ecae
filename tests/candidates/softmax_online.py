"""A correct Triton softmax for rows of any length: an online pass for the row's maximum and sum,
then a pass that writes exp(x - max) / sum, in blocks of BLOCK."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    offs = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=-float("inf"))
        m_new = tl.maximum(m, x)
        live = m_new > -float("inf")  # lanes that have seen a value
        s = tl.where(live, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=-float("inf"))
        tl.store(y_ptr + base + start + offs, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = min(4096, triton.next_power_of_2(cols))
        softmax_online_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=8)
        return y
