"""The elementwise group of the whole-model kernel library (hints/model_kernels/elementwise.py)
against torch: arithmetic and comparisons over broadcast, non-contiguous and scalar operands,
integer and boolean dtypes, activations and their modules, and Python's answer for non-tensors;
each launcher reaching only layout operators."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from hints.model_kernels import elementwise as ew
from tests.model_kernels_checks import assert_matches, layout_only


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def halves(*shape):
    """Floats on a grid of halves in [-4, 4]: ties for comparisons, exact quotients for floor
    division and remainders, negative bases with integral exponents for pow."""
    return torch.randint(-8, 9, shape) / 2


def nonzero(*shape):
    """Divisors: halves away from zero, of either sign."""
    return (torch.randint(1, 5, shape) / 2) * (torch.randint(0, 2, shape) * 2 - 1)


# Two operands in the forms models use: (a, b) to compute with.
OPERAND_FORMS = {
    "broadcast": lambda: (halves(2, 3, 4), nonzero(4)),
    "noncontiguous": lambda: (halves(2, 4, 3).transpose(1, 2), nonzero(2, 3, 8)[..., ::2]),
    "scalar_right": lambda: (halves(2, 3, 4), 1.5),
    "scalar_left": lambda: (-2.5, nonzero(2, 3)),
    "zero_dim": lambda: (halves(3, 4), torch.tensor(-1.5)),
}

FLOAT_BINARY = {
    "add": (ew.kb_add, torch.add),
    "sub": (ew.kb_sub, torch.sub),
    "mul": (ew.kb_mul, torch.mul),
    "div": (ew.kb_div, torch.div),
    "floordiv": (ew.kb_floordiv, torch.floor_divide),
    "remainder": (ew.kb_remainder, torch.remainder),
    "maximum": (ew.kb_maximum, torch.maximum),
    "minimum": (ew.kb_minimum, torch.minimum),
    "eq": (ew.kb_eq, torch.eq),
    "ne": (ew.kb_ne, torch.ne),
    "lt": (ew.kb_lt, torch.lt),
    "le": (ew.kb_le, torch.le),
    "gt": (ew.kb_gt, torch.gt),
    "ge": (ew.kb_ge, torch.ge),
}


def torch_binary(ref, a, b):
    """torch's answer, with scalars as torch takes them (a 0-d tensor where a scalar is first)."""
    if ref in (torch.maximum, torch.minimum) and not isinstance(b, torch.Tensor):
        b = torch.tensor(b)
    if not isinstance(a, torch.Tensor):
        a = torch.tensor(a)
    return ref(a, b)


@pytest.mark.parametrize("form", OPERAND_FORMS)
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_float_binary_matches_torch(op, form):
    ours, ref = FLOAT_BINARY[op]
    a, b = OPERAND_FORMS[form]()
    out = layout_only(ours, a, b)
    assert_matches(out, torch_binary(ref, a, b))
    assert out.is_contiguous()


@pytest.mark.parametrize("rounding_mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_div_rounding_modes(rounding_mode, dtype):
    a = (halves(3, 4) * 4).to(dtype)
    b = (nonzero(4) * 2).to(dtype)
    out = layout_only(ew.kb_div, a, b, rounding_mode=rounding_mode)
    assert_matches(out, torch.div(a, b, rounding_mode=rounding_mode))


def test_add_and_sub_take_alpha():
    a, b = halves(2, 3), halves(3)
    assert_matches(layout_only(ew.kb_add, a, b, alpha=2.5), torch.add(a, b, alpha=2.5))
    assert_matches(layout_only(ew.kb_sub, a, b, alpha=3), torch.sub(a, b, alpha=3))


INT_BINARY = {
    "add": (ew.kb_add, torch.add),
    "mul": (ew.kb_mul, torch.mul),
    "floordiv": (ew.kb_floordiv, torch.floor_divide),
    "remainder": (ew.kb_remainder, torch.remainder),
    "maximum": (ew.kb_maximum, torch.maximum),
    "bitwise_and": (ew.kb_bitwise_and, torch.bitwise_and),
    "bitwise_or": (ew.kb_bitwise_or, torch.bitwise_or),
    "gt": (ew.kb_gt, torch.gt),
}


@pytest.mark.parametrize("op", INT_BINARY)
def test_integer_binary_keeps_integers(op):
    ours, ref = INT_BINARY[op]
    a = torch.randint(-20, 20, (2, 3, 4)).transpose(0, 2)
    sign = torch.randint(0, 2, (3, 1)) * 2 - 1
    b = (torch.randint(1, 6, (3, 1)) * sign).to(torch.int32)  # int64 with int32
    assert_matches(layout_only(ours, a, b), ref(a, b))
    assert_matches(layout_only(ours, a, 3), torch_binary(ref, a, 3))


def test_type_promotion_follows_torch():
    i, f, h = torch.randint(-5, 5, (2, 3)), halves(2, 3), halves(3).half()
    assert_matches(ew.kb_div(i, 2), torch.div(i, 2))  # integers divide into floats
    assert_matches(ew.kb_add(i, 0.5), i + 0.5)
    assert_matches(ew.kb_mul(i, f), i * f)
    assert_matches(ew.kb_add(h, 1.5), h + 1.5)  # a float scalar keeps half
    assert_matches(ew.kb_add(h, f), h + f)
    assert_matches(ew.kb_lt(i, 0.5), i < 0.5)


def test_logical_and_bitwise_on_bools():
    a, b = halves(2, 3) > 0, halves(3) < 1
    assert_matches(layout_only(ew.kb_logical_and, a, b), torch.logical_and(a, b))
    c = halves(2, 3)
    assert_matches(layout_only(ew.kb_logical_or, a, c), torch.logical_or(a, c))
    assert_matches(layout_only(ew.kb_bitwise_and, a, b), a & b)
    assert_matches(layout_only(ew.kb_bitwise_or, a, b), a | b)
    assert_matches(layout_only(ew.kb_logical_not, a.t()), torch.logical_not(a.t()))
    assert_matches(layout_only(ew.kb_bitwise_not, a), ~a)
    i = torch.randint(-9, 9, (5,))
    assert_matches(layout_only(ew.kb_bitwise_not, i), ~i)


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 1, 1.7])
def test_pow_scalar_exponents(exponent):
    x = torch.rand(3, 5).t() + 0.5
    assert_matches(layout_only(ew.kb_pow, x, exponent), torch.pow(x, exponent))


def test_pow_tensor_exponents_and_scalar_base():
    base = halves(4, 6)
    exponent = torch.randint(-2, 4, (6,)).float()  # integral: negative bases keep their sign
    expected = torch.pow(base.masked_fill(base == 0, 1.0), exponent)
    assert_matches(layout_only(ew.kb_pow, base.masked_fill(base == 0, 1.0), exponent), expected)
    x = halves(3, 4)
    assert_matches(layout_only(ew.kb_pow, 2.0, x), torch.pow(2.0, x))
    assert ew.kb_pow(torch.tensor([-8.0]), 1 / 3).isnan().all()
    i = torch.randint(-5, 5, (4,))
    assert_matches(ew.kb_pow(i, 2), i**2)


# Unary launchers and their torch counterparts, with keyword arguments.
UNARY = {
    "neg": (ew.kb_neg, torch.neg, {}),
    "abs": (ew.kb_abs, torch.abs, {}),
    "exp": (ew.kb_exp, torch.exp, {}),
    "sin": (ew.kb_sin, torch.sin, {}),
    "cos": (ew.kb_cos, torch.cos, {}),
    "tanh": (ew.kb_tanh, torch.tanh, {}),
    "sigmoid": (ew.kb_sigmoid, torch.sigmoid, {}),
    "erf": (ew.kb_erf, torch.erf, {}),
    "square": (ew.kb_square, torch.square, {}),
    "relu": (ew.kb_relu, F.relu, {}),
    "relu6": (ew.kb_relu6, F.relu6, {}),
    "hardtanh": (ew.kb_hardtanh, F.hardtanh, {"min_val": -0.5, "max_val": 2.0}),
    "clamp": (ew.kb_clamp, torch.clamp, {"min": -1.0, "max": 0.5}),
    "clamp_min": (ew.kb_clamp_min, torch.clamp_min, {"min": 0.25}),
    "clamp_max": (ew.kb_clamp_max, torch.clamp_max, {"max": 0.25}),
    "gelu": (ew.kb_gelu, F.gelu, {}),
    "gelu_tanh": (ew.kb_gelu, F.gelu, {"approximate": "tanh"}),
    "silu": (ew.kb_silu, F.silu, {}),
    "softplus": (ew.kb_softplus, F.softplus, {}),
    "softplus_beta": (ew.kb_softplus, F.softplus, {"beta": 2.0, "threshold": 1.0}),
    "leaky_relu": (ew.kb_leaky_relu, F.leaky_relu, {"negative_slope": 0.2}),
    "elu": (ew.kb_elu, F.elu, {"alpha": 0.5}),
    "hardswish": (ew.kb_hardswish, F.hardswish, {}),
    "hardsigmoid": (ew.kb_hardsigmoid, F.hardsigmoid, {}),
    "mish": (ew.kb_mish, F.mish, {}),
}
POSITIVE_UNARY = {
    "log": (ew.kb_log, torch.log),
    "sqrt": (ew.kb_sqrt, torch.sqrt),
    "rsqrt": (ew.kb_rsqrt, torch.rsqrt),
    "reciprocal": (ew.kb_reciprocal, torch.reciprocal),
}


@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_torch(op):
    ours, ref, kwargs = UNARY[op]
    x = (torch.randn(4, 2, 6) * 4)[:, :, ::2].transpose(0, 1)  # tails of tanh, softplus too
    assert_matches(layout_only(ours, x, **kwargs), ref(x, **kwargs))


@pytest.mark.parametrize("op", POSITIVE_UNARY)
def test_unary_of_positive_values_matches_torch(op):
    ours, ref = POSITIVE_UNARY[op]
    x = torch.rand(3, 4).t() * 5 + 0.05
    assert_matches(layout_only(ours, x), ref(x))


def test_unary_dtypes_follow_torch():
    i = torch.randint(-5, 5, (2, 3))
    assert_matches(layout_only(ew.kb_exp, i), torch.exp(i))  # integers give floats
    assert_matches(layout_only(ew.kb_abs, i), torch.abs(i))
    assert_matches(layout_only(ew.kb_relu, i), torch.relu(i))
    h = torch.randn(2, 5).half()
    assert_matches(layout_only(ew.kb_gelu, h), F.gelu(h), rtol=1e-3, atol=1e-3)


def test_clamp_with_tensor_bounds():
    x, low = torch.randn(2, 3), torch.randn(3) - 0.5
    assert_matches(layout_only(ew.kb_clamp, x, low, 0.5), torch.clamp(x, low, torch.tensor(0.5)))
    high = torch.tensor(0.25)
    assert_matches(layout_only(ew.kb_clamp, x, max=high), torch.clamp(x, max=high))


def test_nan_propagates_through_clamps_and_maximum():
    x = torch.tensor([float("nan"), -2.0, 2.0])
    for ours, ref in [(ew.kb_relu, torch.relu), (ew.kb_relu6, F.relu6)]:
        torch.testing.assert_close(ours(x), ref(x), equal_nan=True)
    torch.testing.assert_close(ew.kb_maximum(x, 0.0), torch.clamp_min(x, 0.0), equal_nan=True)


def test_inplace_activation_writes_into_its_input():
    x = torch.randn(3, 4)
    expected = F.leaky_relu(x, 0.1)
    out = layout_only(ew.kb_leaky_relu, x, 0.1, inplace=True)
    assert out is x
    assert_matches(x, expected)


def test_where_and_masked_fill():
    cond, a, b = torch.randn(2, 1, 4) > 0, torch.randn(3, 4), torch.randn(2, 3, 1)
    assert_matches(layout_only(ew.kb_where, cond, a, b), torch.where(cond, a, b))
    assert_matches(layout_only(ew.kb_where, cond, a.t().t(), 0.0), torch.where(cond, a, 0.0))
    assert_matches(layout_only(ew.kb_where, cond, 1.0, 0.0), torch.where(cond, 1.0, 0.0))
    x, mask = torch.randn(2, 4, 4), torch.ones(4, 4, dtype=torch.bool).tril()
    assert_matches(
        layout_only(ew.kb_masked_fill, x, ~mask, -float("inf")), x.masked_fill(~mask, -torch.inf)
    )
    value = torch.tensor(2.5)
    assert_matches(layout_only(ew.kb_masked_fill, x, x > 0, value), x.masked_fill(x > 0, value))


def test_dropout_is_the_identity_at_inference():
    x = torch.randn(2, 3)
    assert layout_only(ew.kb_dropout, x, 0.3, training=False) is x
    assert ew.kb_dropout(x, 0.0) is x
    with pytest.raises(NotImplementedError, match="training"):
        ew.kb_dropout(x, 0.3)


def test_python_operands_get_pythons_answer():
    assert ew.kb_add(2, 3) == 5
    assert ew.kb_add((1,), (2,)) == (1, 2)
    assert ew.kb_sub(5, 2, alpha=2) == 1
    assert ew.kb_mul([0], 2) == [0, 0]
    assert ew.kb_div(7, 2) == 3.5
    assert ew.kb_div(-7, 2, rounding_mode="trunc") == -3
    assert ew.kb_floordiv(-7, 2) == -4
    assert ew.kb_remainder(-7, 3) == 2
    assert ew.kb_pow(2, 10) == 1024
    assert ew.kb_maximum(2, 3.5) == 3.5
    assert ew.kb_eq(1, 1) is True and ew.kb_lt(2, 1) is False
    assert ew.kb_logical_and(1, 0) is False
    assert ew.kb_neg(2) == -2 and ew.kb_abs(-3) == 3
    assert ew.kb_exp(0.0) == 1.0 and ew.kb_sqrt(9) == 3.0 and ew.kb_rsqrt(4) == 0.5
    assert ew.kb_logical_not(0) is True


def test_unsupported_forms_raise():
    x = torch.randn(3)
    with pytest.raises(NotImplementedError, match="approximate"):
        ew.kb_gelu(x, approximate="sigmoid")
    with pytest.raises(NotImplementedError, match="rounding_mode"):
        ew.kb_div(x, 2.0, rounding_mode="round")
    with pytest.raises(NotImplementedError, match="integer powers"):
        ew.kb_pow(torch.arange(3), torch.arange(3))
    with pytest.raises(NotImplementedError, match="complex"):
        ew.kb_neg(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="min and max"):
        ew.kb_clamp(x)
    with pytest.raises(TypeError, match="tensor"):
        ew.kb_relu(2.0)


def test_int64_indexing_path(monkeypatch):
    """Offsets past int32 switch the kernel to int64 indexing; forced here on a small tensor."""
    monkeypatch.setattr(ew, "_ELEMENTWISE_INT32_MAX", 8)
    a, b = halves(3, 4).t(), nonzero(3, 1)
    assert_matches(ew.kb_mul(a, b.t()), a * b.t())


def test_collapse_merges_dims_every_operand_walks_contiguously():
    shape, out = (2, 3, 4), (12, 4, 1)
    assert ew._elementwise_collapse(shape, [out, (12, 4, 1)]) == ((24,), [(1,), (1,)])
    assert ew._elementwise_collapse(shape, [out, (0, 0, 1)]) == ((6, 4), [(4, 1), (0, 1)])
    assert ew._elementwise_collapse((1, 5), [(5, 1), (0, 0)]) == ((5,), [(1,), (0,)])


# Modules: (ours, nn's, constructor arguments).
MODULES = [
    (ew.KbReLU, nn.ReLU, {}),
    (ew.KbReLU, nn.ReLU, {"inplace": True}),
    (ew.KbReLU6, nn.ReLU6, {}),
    (ew.KbHardtanh, nn.Hardtanh, {"min_val": -0.5, "max_val": 2.0}),
    (ew.KbGELU, nn.GELU, {"approximate": "tanh"}),
    (ew.KbSiLU, nn.SiLU, {}),
    (ew.KbSigmoid, nn.Sigmoid, {}),
    (ew.KbTanh, nn.Tanh, {}),
    (ew.KbDropout, nn.Dropout, {"p": 0.0}),
    (ew.KbIdentity, nn.Identity, {}),
    (ew.KbLeakyReLU, nn.LeakyReLU, {"negative_slope": 0.1, "inplace": True}),
    (ew.KbELU, nn.ELU, {"alpha": 0.7}),
    (ew.KbHardswish, nn.Hardswish, {}),
    (ew.KbHardsigmoid, nn.Hardsigmoid, {}),
    (ew.KbSoftplus, nn.Softplus, {"beta": 2.0, "threshold": 5.0}),
    (ew.KbMish, nn.Mish, {}),
]


@pytest.mark.parametrize(
    ("ours", "theirs", "kwargs"), MODULES, ids=lambda v: getattr(v, "__name__", "")
)
def test_modules_match_nn(ours, theirs, kwargs):
    module = ours(**kwargs)
    assert isinstance(module, theirs)
    x = torch.randn(2, 3, 4) * 3
    expected = theirs(**kwargs)(x.clone())
    assert_matches(layout_only(module, x.clone()), expected)


def test_dropout_module_in_eval_mode_passes_its_input_through():
    module = ew.KbDropout(0.5).eval()
    x = torch.randn(4)
    assert layout_only(module, x) is x
