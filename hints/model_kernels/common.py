"""What every group of the kernel library shares: the precisions of tl.dot on fp32 operands, the
products' tile plan and the recurrent steps' layout (the renderer sets them per candidate), the
test for "an operand is a tensor" and the interpreter's tiles."""

import torch

# "ieee" (fp32), "tf32x3" or "tf32": pass it to tl.dot as its input_precision (a tl.constexpr).
KB_DOT_PRECISION = "ieee"
# The same for convolutions, apart: at its defaults PyTorch computes matmuls in fp32 but
# convolutions in TF32 (cuDNN), so a strict search may take TF32 for the convolutions alone.
KB_CONV_PRECISION = "ieee"
# "small", "base" or "large": the GPU tiles of the products (convolutions, matmuls, recurrent
# steps); the renderer sets it per candidate, so that the search can time the same model at
# several tile plans.
KB_TILES = "base"
# "single" or "spread": a recurrent layer's steps on a GPU walked by one program per block of
# batch rows, or spread over programs that each own a tile of hidden units and meet after each
# step (hints/model_kernels/recurrent.py).
KB_RECURRENT = "single"


def kb_is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


# triton.cdiv and triton.next_power_of_2 as plain functions: Triton's are constexpr functions,
# whose calls from Python cost 4-6 us each, and a launcher makes several.
def kb_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kb_next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 0 else 0


def kb_broadcast_shapes(*shapes) -> torch.Size:
    """torch.broadcast_shapes, in plain Python: torch's goes through its symbolic-shape
    reference code, 50-70 us a call."""
    rank = max((len(shape) for shape in shapes), default=0)
    result = [1] * rank
    for shape in shapes:
        for i, size in enumerate(shape, rank - len(shape)):
            if size != 1 and result[i] not in (1, size):
                raise RuntimeError(
                    f"Shape mismatch: objects cannot be broadcast to a single shape: "
                    f"{', '.join(str(tuple(s)) for s in shapes)}"
                )
            result[i] = size if size != 1 else result[i]
    return torch.Size(result)


# Triton's CPU interpreter (the kernels run on cpu tensors there) pays per operation, not per
# element: a launcher there gives each program a tile of up to this many elements, where a GPU
# gets the launcher's usual tile. One 2x64x224x224 max pool took 33.5 s at the GPU's tiles.
KB_INTERPRETER_TILE = 1 << 17


def kb_interpreted(t: torch.Tensor) -> bool:
    return t.device.type == "cpu"


# The activations a fused epilogue applies (kb_conv_fused's; kb_linear_act's are KB_FUSED_LINEAR),
# by the name of the op that computes them on its own.
KB_FUSED_ACTIVATIONS = ("relu", "relu6", "sigmoid", "silu", "gelu", "tanh")
KB_FUSED_LINEAR = ("relu", "gelu", "tanh", "sigmoid")
