"""A Triton RMSNorm over dim 1 of (N, C, H, W) that reads its input twice, as recorded."""

import torch
import triton
import triton.language as tl


@triton.jit
def kb_rmsnorm_dim1(x_ptr, out_ptr, C, HW, eps, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < HW
    base = tl.program_id(1) * C * HW
    squares = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, C):
        x = tl.load(x_ptr + base + c * HW + offsets, mask=mask, other=0.0)
        squares += x * x
    inverse = 1.0 / tl.sqrt(squares / C + eps)
    for c in range(0, C):
        x = tl.load(x_ptr + base + c * HW + offsets, mask=mask, other=0.0)
        tl.store(out_ptr + base + c * HW + offsets, x * inverse, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n, c, h, w = x.shape
        block = 128
        kb_rmsnorm_dim1[(triton.cdiv(h * w, block), n)](x, out, c, h * w, self.eps, BLOCK=block)
        return out
