"""Attack: a softmax whose outputs keep only bfloat16's 8 mantissa bits, truncated with integer
operations so that no low-precision dtype appears in the source; only its measured error can
tell, and it must be beyond what the gate allows an fp32 kernel (one rounding at least)."""

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
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    bits = y.to(tl.int32, bitcast=True) & -65536  # clear the 16 low mantissa bits
    tl.store(y_ptr + row * n_cols + offs, bits.to(tl.float32, bitcast=True), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
