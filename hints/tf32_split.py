"""tf32x3 as three TF32 tensor-core products, written out: each fp32 operand is split into its
TF32 rounding and the exact remainder, and a @ b is a_lo @ b + a @ b_lo + a @ b (the dropped
a_lo @ b_lo is 2**-22 of the product). Triton's own tf32x3 splits every tile in registers at every
step and writes the parts back to shared memory; split ahead in one memory-bound pass, the parts
go from global memory straight to the tensor cores.

ROUND and CODE go into candidate templates: ROUND the rounding alone, CODE also the in-kernel
product, the split kernel and its host launcher."""

ROUND = '''
@triton.jit
def round_to_tf32(x):
    """x rounded to TF32's 10 mantissa bits, to nearest (ties away from zero), as cuDNN rounds."""
    bits = x.to(tl.int32, bitcast=True)  # the sign apart, the magnitude's bits in order
    return ((bits + 0x1000) & -0x2000).to(tl.float32, bitcast=True)  # half an ulp up, 13 bits off
'''

CODE = (
    ROUND
    + '''

@triton.jit
def dot_tf32x3(a, a_lo, b, b_lo, acc):
    """acc + a @ b from TF32 parts (a, b) and remainders (a_lo, b_lo), small terms first."""
    acc = tl.dot(a_lo, b, acc, input_precision="tf32")
    acc = tl.dot(a, b_lo, acc, input_precision="tf32")
    return tl.dot(a, b, acc, input_precision="tf32")


@triton.jit
def split_kernel(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    # lo = x - hi is exact in fp32 and at most half a TF32 step: TF32 keeps 10 more of x's bits.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    hi = tl.where(tl.abs(x) < float("inf"), round_to_tf32(x), x)  # inf and nan as they are
    tl.store(hi_ptr + offs, hi, mask=mask)
    tl.store(lo_ptr + offs, tl.where(hi == x, 0.0, x - hi), mask=mask)  # inf: lo 0, not nan


def split_tf32(t):
    """(hi, lo), hi + lo == t, both with t's layout (a transposed operand stays transposed)."""
    transposed = not t.is_contiguous() and t.mT.is_contiguous()
    base = (t.mT if transposed else t).contiguous()
    hi, lo = torch.empty_like(base), torch.empty_like(base)
    split_kernel[(triton.cdiv(base.numel(), 1024),)](base, hi, lo, base.numel(), BLOCK=1024)
    return (hi.mT, lo.mT) if transposed else (hi, lo)
'''
)
