"""What every group of the kernel library shares: the precision of tl.dot on fp32 operands (the
renderer sets it per candidate) and the test for "an operand is a tensor"."""

import torch

# "ieee" (fp32), "tf32x3" or "tf32": pass it to tl.dot as its input_precision (a tl.constexpr).
KB_DOT_PRECISION = "ieee"


def kb_is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


# The activations a fused epilogue applies (kb_conv_fused's; kb_linear_act's are KB_FUSED_LINEAR),
# by the name of the op that computes them on its own.
KB_FUSED_ACTIVATIONS = ("relu", "relu6", "sigmoid", "silu", "gelu", "tanh")
KB_FUSED_LINEAR = ("relu", "gelu", "tanh", "sigmoid")
