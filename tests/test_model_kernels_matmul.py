"""The whole-model family's products (hints/model_kernels/matmul.py) against torch on the Triton
interpreter: every torch.matmul form, mm/bmm/addmm/baddbmm, linear and its fused activations,
transposed and broadcast operands, K off the block size, and einsum (KernelBench's Mamba2
equations among them), each launch reaching only layout torch operators."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from model_kernels_checks import assert_matches, layout_only

from hints.model_kernels import matmul

ATOL = 1e-4  # fp32 sums of up to ~40 products of unit normals: observed errors ~1e-6


def randn(*shape, seed=0):
    torch.manual_seed(seed + sum(shape))
    return torch.randn(*shape)


def check(ours, theirs, *args, **kwargs):
    assert_matches(layout_only(ours, *args, **kwargs), theirs(*args, **kwargs), atol=ATOL)


# (left shape, right shape): K = 20 and 33 are off the 16/32 block sizes.
MATMUL_SHAPES = [
    ((20,), (20,)),  # dot: a 0-dim result
    ((20,), (2, 20, 5)),  # a row times a batch
    ((2, 3, 7, 20), (20,)),  # a batch times a column
    ((7, 33), (33, 5)),
    ((2, 3, 7, 20), (20, 5)),  # batch folded into rows
    ((2, 1, 7, 20), (3, 20, 5)),  # broadcast batch dims
    ((7, 20), (2, 20, 5)),  # a shared left matrix
    ((2, 2, 2, 3, 20), (2, 1, 2, 20, 4)),  # three batch dims
]


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES)
def test_matmul_matches_torch(a_shape, b_shape):
    check(matmul.kb_matmul, torch.matmul, randn(*a_shape), randn(*b_shape, seed=1))


def test_matmul_reads_transposed_and_strided_operands():
    a, b = randn(2, 33, 7).transpose(1, 2), randn(5, 2, 33).permute(1, 2, 0)
    check(matmul.kb_matmul, torch.matmul, a, b)
    check(matmul.kb_mm, torch.mm, a[1], b[0][:, ::2])
    # MinGPT's q @ k^T: heads of a [B, T, heads, d] view, batch dims that do not merge
    q = randn(2, 5, 2, 8).transpose(1, 2)
    check(matmul.kb_matmul, torch.matmul, q, q.transpose(-2, -1))


def test_mm_bmm_addmm_baddbmm_match_torch():
    a, b = randn(2, 7, 33), randn(2, 33, 5, seed=1)
    check(matmul.kb_mm, torch.mm, a[0], b[0])
    check(matmul.kb_bmm, torch.bmm, a, b)
    for bias in (randn(5), randn(7, 1), randn(7, 5)):
        check(matmul.kb_addmm, torch.addmm, bias, a[0], b[0])
        check(matmul.kb_addmm, torch.addmm, bias, a[0], b[0], beta=0.5, alpha=2.0)
    check(matmul.kb_baddbmm, torch.baddbmm, randn(2, 7, 5), a, b, beta=-1.5, alpha=0.5)
    check(matmul.kb_baddbmm, torch.baddbmm, randn(1, 5), a, b)
    nan = torch.full((7, 5), float("nan"))  # beta=0 ignores input, as torch does
    check(matmul.kb_addmm, torch.addmm, nan, a[0], b[0], beta=0)


ACTIVATIONS = {
    "none": lambda t: t,
    "relu": torch.relu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_linear_act_fuses_bias_and_activation(act):
    x, w, b = randn(2, 3, 20), randn(6, 20, seed=1), randn(6, seed=2)

    def theirs(x, w, b, act):
        return ACTIVATIONS[act](F.linear(x, w, b))

    check(matmul.kb_linear_act, theirs, x, w, b, act)


def test_linear_matches_torch_at_every_rank():
    w, b = randn(6, 20, seed=1), randn(6, seed=2)
    for x in (randn(20), randn(3, 20), randn(2, 3, 4, 20), randn(3, 2, 20).transpose(0, 1)):
        check(matmul.kb_linear, F.linear, x, w, b)
    check(matmul.kb_linear, F.linear, randn(3, 20), w)
    layer = nn.Linear(20, 6)
    ours = matmul.KbLinear(20, 6)
    ours.load_state_dict(layer.state_dict())
    x = randn(2, 3, 20)
    assert_matches(layout_only(ours, x), layer(x), atol=ATOL)


EINSUMS = [
    ("bij,bjk->bik", [(2, 3, 20), (2, 20, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 8), (2, 2, 5, 8)]),
    ("bijl,lk->bijk", [(2, 3, 4, 8), (8, 5)]),  # KernelBench level 1's 4-D times a matrix
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("ii->i", [(4, 4)]),  # a diagonal
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),  # an outer product
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("ijk,jl->il", [(3, 4, 5), (4, 2)]),  # k in one operand only: summed first
    # KernelBench level 3's Mamba2 (b, c chunks, l/s block positions, h heads, n state, p head)
    (
        "bclhn,bcshn,bhcls,bcshp->bclhp",
        [(2, 2, 4, 2, 3), (2, 2, 4, 2, 3), (2, 2, 2, 4, 4), (2, 2, 4, 2, 5)],
    ),  # fmt: skip
    ("bclhn,bhcl,bclhp->bchpn", [(2, 2, 4, 2, 3), (2, 2, 2, 4), (2, 2, 4, 2, 5)]),
    ("bhzc,bchpn->bzhpn", [(2, 2, 3, 3), (2, 3, 2, 5, 3)]),
    ("bclhn,bchpn,bhcl->bclhp", [(2, 2, 4, 2, 3), (2, 2, 2, 5, 3), (2, 2, 2, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUMS)
def test_einsum_matches_torch(equation, shapes):
    operands = [randn(*shape, seed=k) for k, shape in enumerate(shapes)]
    check(matmul.kb_einsum, torch.einsum, equation, *operands)


def test_einsum_takes_a_list_and_broadcasts_size_one_dims():
    a, b = randn(2, 3, 4), randn(1, 4, 5, seed=1)
    check(matmul.kb_einsum, torch.einsum, "bij,bjk->bik", [a, b])
    check(matmul.kb_einsum, torch.einsum, "bij,bjk->bik", randn(2, 3, 8)[..., ::2], b)


def test_netvlad_products():
    """KernelBench level 3's NetVlad: rows times the clusters, then assignment^T @ x."""
    x, clusters = randn(2 * 5, 16), randn(16, 6, seed=1)
    check(matmul.kb_matmul, torch.matmul, x, clusters)
    assignment = randn(2, 5, 4, seed=2)
    check(matmul.kb_matmul, torch.matmul, assignment.transpose(1, 2), x.view(2, 5, 16))


def test_unsupported_forms_raise():
    ints = torch.ones(3, 3, dtype=torch.int64)
    with pytest.raises(NotImplementedError, match="floating-point"):
        matmul.kb_matmul(ints, ints)
    with pytest.raises(NotImplementedError, match="activation"):
        matmul.kb_linear_act(randn(3, 4), randn(2, 4), None, "silu")
    with pytest.raises(NotImplementedError, match="2-D weight"):
        matmul.kb_linear(randn(3, 4), randn(4))
    with pytest.raises(RuntimeError, match="do not multiply"):
        matmul.kb_matmul(randn(3, 4), randn(5, 2))
