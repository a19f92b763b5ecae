"""A correct grouped 3x3 convolution, padding 1: one program per (image, output channel)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def groupconv_kernel(x_ptr, w_ptr, y_ptr, C, H, W, CPG, BLOCK: tl.constexpr):
    n = tl.program_id(0)
    co = tl.program_id(1)
    pix = tl.arange(0, BLOCK)
    oh, ow = pix // W, pix % W
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    group_start = (co // CPG) * CPG
    for ci in range(0, CPG):
        for tap in range(0, 9):
            ih = oh + tap // 3 - 1
            iw = ow + tap % 3 - 1
            ok = (pix < H * W) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x = tl.load(x_ptr + ((n * C + group_start + ci) * H + ih) * W + iw, mask=ok, other=0.0)
            acc += x * tl.load(w_ptr + (co * CPG + ci) * 9 + tap)
    tl.store(y_ptr + (n * C + co) * H * W + pix, acc, mask=pix < H * W)


class ModelNew(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        groupconv_kernel[(n, c)](x, self.conv.weight, y, c, h, w, c // self.groups,
                                 BLOCK=triton.next_power_of_2(h * w))  # fmt: skip
        return y
