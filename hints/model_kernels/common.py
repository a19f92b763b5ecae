"""What every group of the kernel library shares: the precision of tl.dot on fp32 operands (the
renderer sets it per candidate) and the test for "an operand is a tensor"."""

import torch

# "ieee" (fp32), "tf32x3" or "tf32": pass it to tl.dot as its input_precision (a tl.constexpr).
KB_DOT_PRECISION = "ieee"


def kb_is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)
