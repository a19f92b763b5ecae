"""The whole-model family's reductions and norms (hints/model_kernels/reductions.py) against torch
on the Triton interpreter: every launcher over None, negative and tuple dims with keepdim, on a
permuted (non-contiguous) input, rows wider than one chunk, torch's return forms (max's values
and indices), the norms' running statistics in training, and the modules, each launch reaching
only layout torch operators."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from model_kernels_checks import assert_matches, layout_only

from hints.model_kernels import reductions as R


def sample(*shape, seed=0):
    """A non-contiguous input of `shape` (a permuted view)."""
    torch.manual_seed(seed)
    return torch.randn(*shape[1:], shape[0]).movedim(-1, 0)


def check(ours, theirs, *args, **kwargs):
    with torch.no_grad():
        expected = theirs(*args, **kwargs)
    assert_matches(layout_only(ours, *args, **kwargs), expected)


@pytest.fixture
def small_chunks(monkeypatch):
    """Tiles of 8 elements: every reduced extent here spans several chunks and a partial one."""
    monkeypatch.setattr(R, "_reductions_TILE", 8)


@pytest.fixture
def split_rows(monkeypatch):
    """Tiles of 8 elements and a GPU of 16 programs: a few long rows split over programs."""
    monkeypatch.setattr(R, "_reductions_TILE", 8)
    monkeypatch.setattr(R, "_reductions_PROGRAMS", 16)
    monkeypatch.setattr(R, "_reductions_SPLIT_CHUNKS", 2)


X = sample(6, 4, 5)
DIMS = [(None, False), (1, False), (-1, True), ((0, 2), False), ((-1, 0), True), ((), False)]


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (R.kb_sum, torch.sum),
        (R.kb_mean, torch.mean),
        (R.kb_amax, torch.amax),
        (R.kb_amin, torch.amin),
        (R.kb_var, torch.var),
        (R.kb_std, torch.std),
        (R.kb_logsumexp, torch.logsumexp),
        (R.kb_vector_norm, torch.linalg.vector_norm),
    ],
)
@pytest.mark.parametrize("dim, keepdim", DIMS)
def test_reductions_over_any_dims_match_torch(ours, theirs, dim, keepdim):
    if dim is None and theirs in (torch.amax, torch.amin, torch.logsumexp):
        dim = tuple(range(X.dim()))  # their "all dims" spelling
    if dim == () and theirs is torch.logsumexp:
        return  # torch.logsumexp reduces nothing over (); nobody writes that
    check(ours, theirs, X, dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("ours, theirs", [(R.kb_prod, torch.prod), (R.kb_argmax, torch.argmax),
                                          (R.kb_argmin, torch.argmin)])  # fmt: skip
@pytest.mark.parametrize("dim, keepdim", [(None, False), (0, True), (-1, False), (1, False)])
def test_single_dim_reductions_match_torch(ours, theirs, dim, keepdim):
    if dim is None and theirs is torch.prod:
        check(ours, theirs, X)
    else:
        check(ours, theirs, X, dim, keepdim=keepdim)


@pytest.mark.parametrize(
    "args, kwargs",
    [((1, False), {}), ((False,), {}), ((-1,), {"correction": 0}),
     (((0, 2),), {"correction": 2, "keepdim": True}), ((1, True, True), {})],
)  # fmt: skip
@pytest.mark.parametrize("ours, theirs", [(R.kb_var, torch.var), (R.kb_std, torch.std)])
def test_variance_takes_both_of_torch_forms(ours, theirs, args, kwargs):
    check(ours, theirs, X, *args, **kwargs)


@pytest.mark.parametrize("ours, theirs, p", [(R.kb_norm, torch.norm, "fro"),
                                             (R.kb_norm, torch.norm, 1),
                                             (R.kb_vector_norm, torch.linalg.vector_norm, 1),
                                             (R.kb_vector_norm, torch.linalg.vector_norm, 2),
                                             (R.kb_vector_norm, torch.linalg.vector_norm,
                                              float("inf"))])  # fmt: skip
def test_norms_of_each_order_match_torch(ours, theirs, p):
    check(ours, theirs, X, p, (0, -1), True)
    check(ours, theirs, X, p)


def test_dtype_keyword_and_integer_inputs_follow_torch():
    check(R.kb_sum, torch.sum, X, 1, dtype=torch.float64)
    check(R.kb_mean, torch.mean, X, (0, 1), dtype=torch.float64)
    counts = torch.rand(3, 7) > 0.5
    check(R.kb_sum, torch.sum, counts, -1)
    ints = torch.randint(-9, 9, (3, 7)).t()
    for ours, theirs in [(R.kb_sum, torch.sum), (R.kb_prod, torch.prod), (R.kb_amax, torch.amax),
                         (R.kb_argmin, torch.argmin), (R.kb_cumsum, torch.cumsum)]:  # fmt: skip
        check(ours, theirs, ints, 0)
    check(R.kb_cumsum, torch.cumsum, ints, 1, dtype=torch.float32)


def test_max_and_min_return_torchs_forms():
    assert_matches(layout_only(R.kb_max, X), torch.max(X))
    assert_matches(layout_only(R.kb_min, X), torch.min(X))
    for ours, theirs in [(R.kb_max, torch.max), (R.kb_min, torch.min)]:
        result, expected = layout_only(ours, X, -2, keepdim=True), theirs(X, -2, keepdim=True)
        assert_matches(result.values, expected.values)
        assert_matches(result.indices, expected.indices)
        assert_matches(tuple(result), tuple(expected))
        assert_matches(result[1], layout_only(ours, X, 1, True)[1])


def test_indices_take_the_first_of_ties(small_chunks):
    x = torch.tensor([[1.0, 3.0, 0.0, 3.0, 2.0, 3.0, 1.0, 0.0, 3.0, 2.0, 0.0]])
    assert layout_only(R.kb_max, x, 1).indices.tolist() == [1]
    assert layout_only(R.kb_argmin, x, 1).tolist() == [2]
    assert layout_only(R.kb_argmax, x.t()).tolist() == 1


def test_elementwise_max_and_unsupported_forms_raise():
    with pytest.raises(NotImplementedError, match="kb_maximum"):
        R.kb_max(X, X)
    with pytest.raises(NotImplementedError, match="one int dim"):
        R.kb_max(X, (0, 1))
    with pytest.raises(NotImplementedError, match="order 3"):
        R.kb_norm(X, 3)
    with pytest.raises(NotImplementedError, match="p=3"):
        R.kb_normalize(X, 3)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        R.kb_layer_norm(X, (4,))
    with pytest.raises(IndexError):
        R.kb_sum(X, 3)


SOFTMAXES = [(R.kb_softmax, F.softmax), (R.kb_log_softmax, F.log_softmax),
             (R.kb_softmin, F.softmin)]  # fmt: skip


@pytest.mark.parametrize("ours, theirs", SOFTMAXES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family_matches_torch(ours, theirs, dim):
    check(ours, theirs, X, dim)


def test_softmax_keywords_and_forms_match_torch():
    check(R.kb_softmax, F.softmax, X, -1, dtype=torch.float64)
    check(R.kb_softmax, torch.softmax, X, 0, torch.float64)  # torch.softmax's positional dtype
    with pytest.warns(UserWarning):
        check(R.kb_log_softmax, F.log_softmax, X)  # torch's implicit dim
    causal = torch.randn(5, 5).masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf"))
    check(R.kb_softmax, F.softmax, causal, -1)
    check(R.kb_logsumexp, torch.logsumexp, causal, 1)


@pytest.mark.parametrize("dim", [0, -1, 1])
def test_cumsum_matches_torch(dim):
    check(R.kb_cumsum, torch.cumsum, X, dim)


def test_shape_keeping_ops_over_a_view_of_three_groups_give_torchs_values_and_layout():
    """Mamba2's blocks, [b, h, c, l] laid out as b c l h: no two kept dims merge, so an output in
    x's layout could not be walked (on an H100, KernelBench's 48 and 49 raised here)."""
    blocks = torch.randn(2, 3, 4, 5).permute(0, 3, 1, 2)
    for ours, theirs in [(R.kb_cumsum, torch.cumsum), *SOFTMAXES]:
        result, expected = layout_only(ours, blocks, -1), theirs(blocks, -1)
        assert_matches(result, expected)
        assert result.stride() == expected.stride()


@pytest.mark.parametrize("p, dim", [(2.0, 1), (1, -1), (2, 0)])
def test_normalize_matches_torch(p, dim):
    check(R.kb_normalize, F.normalize, X, p, dim)
    check(R.kb_normalize, F.normalize, X, p=p, dim=dim, eps=10.0)


def test_rows_wider_than_a_chunk(small_chunks):
    x = sample(3, 29, 2)  # a reduced extent of 29 = 3 chunks of 8 and a partial one
    for ours, theirs in [(R.kb_sum, torch.sum), (R.kb_var, torch.var), (R.kb_argmax, torch.argmax),
                         (R.kb_softmax, F.softmax), (R.kb_log_softmax, F.log_softmax),
                         (R.kb_logsumexp, torch.logsumexp), (R.kb_cumsum, torch.cumsum),
                         (R.kb_normalize, F.normalize)]:  # fmt: skip
        check(ours, theirs, x, 1)
    check(R.kb_prod, torch.prod, x * 0.1 + 1.0, 1)
    check(R.kb_mean, torch.mean, x, (0, 1))
    assert_matches(tuple(layout_only(R.kb_max, x, 1)), tuple(torch.max(x, 1)))
    weight, bias = torch.randn(29), torch.randn(29)
    check(R.kb_layer_norm, F.layer_norm, x.transpose(1, 2), (29,), weight, bias)
    check(R.kb_rms_norm, F.rms_norm, x.transpose(1, 2), (29,), weight)
    check(R.kb_batch_norm, F.batch_norm, x, None, None, torch.randn(29), None, True)


@pytest.mark.parametrize("dim", [None, (0, 2), 1])
def test_few_long_rows_split_over_programs(split_rows, dim):
    for ours, theirs in [(R.kb_sum, torch.sum), (R.kb_mean, torch.mean), (R.kb_var, torch.var),
                         (R.kb_std, torch.std),
                         (R.kb_vector_norm, torch.linalg.vector_norm)]:  # fmt: skip
        check(ours, theirs, X, dim=dim)
    check(R.kb_amin, torch.amin, X, () if dim is None else dim)
    single = 1 if dim == 1 else None
    check(R.kb_prod, torch.prod, X * 0.2 + 1.0, *(() if single is None else (single,)))
    check(R.kb_argmax, torch.argmax, X, single)
    check(R.kb_argmin, torch.argmin, X.round(), single)  # ties across the parts
    assert_matches(tuple(layout_only(R.kb_max, X, 0)), tuple(torch.max(X, 0)))
    ours, theirs = running_stats(4), running_stats(4)
    assert_matches(layout_only(R.kb_batch_norm, X, *ours, None, None, True),
                   F.batch_norm(X, *theirs, None, None, True))  # fmt: skip
    assert_matches(ours, theirs)


def affine(*shape):
    """A weight near 1 and a bias of `shape`."""
    torch.manual_seed(1)
    return torch.rand(shape) + 0.5, torch.randn(shape)


def running_stats(channels):
    torch.manual_seed(2)
    return torch.randn(channels), torch.rand(channels) + 0.5


@pytest.mark.parametrize("shape, normalized", [((2, 3, 7), (7,)), ((2, 3, 7), (3, 7))])
@pytest.mark.parametrize("with_affine", [True, False])
def test_layer_and_rms_norm_match_torch(shape, normalized, with_affine):
    x = sample(*shape)
    weight, bias = affine(*normalized) if with_affine else (None, None)
    check(R.kb_layer_norm, F.layer_norm, x, normalized, weight, bias, eps=1e-3)
    check(R.kb_rms_norm, F.rms_norm, x, normalized, weight)
    check(R.kb_rms_norm, F.rms_norm, x, normalized, weight, eps=0.5)


@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 4), 3), ((2, 4, 5), 1), ((2, 4, 5), 4)])
def test_group_norm_matches_torch(shape, groups):
    x = sample(*shape)
    check(R.kb_group_norm, F.group_norm, x, groups, *affine(shape[1]), eps=1e-3)
    check(R.kb_group_norm, F.group_norm, x, groups)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2), (4, 3)])
def test_batch_norm_in_eval_and_training_matches_torch(shape):
    x = sample(*shape)
    weight, bias = affine(3)
    check(R.kb_batch_norm, F.batch_norm, x, *running_stats(3), weight, bias, eps=1e-3)
    ours, theirs = running_stats(3), running_stats(3)
    assert_matches(layout_only(R.kb_batch_norm, x, *ours, weight, bias, True, 0.3),
                   F.batch_norm(x, *theirs, weight, bias, True, 0.3))  # fmt: skip
    assert_matches(ours, theirs)  # the running statistics, updated in place
    check(R.kb_batch_norm, F.batch_norm, x, None, None, training=True)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)])
def test_instance_norm_matches_torch(shape):
    x = sample(*shape)
    weight, bias = affine(3)
    check(R.kb_instance_norm, F.instance_norm, x, weight=weight, bias=bias)
    check(R.kb_instance_norm, F.instance_norm, x, *running_stats(3), use_input_stats=False)
    ours, theirs = running_stats(3), running_stats(3)
    assert_matches(layout_only(R.kb_instance_norm, x, *ours, weight, bias, momentum=0.2),
                   F.instance_norm(x, *theirs, weight, bias, momentum=0.2))  # fmt: skip
    assert_matches(ours, theirs)


def test_batch_norm_scale_shift_is_evals_affine():
    bn = nn.BatchNorm2d(3, eps=1e-3)
    with torch.no_grad():
        bn.weight.copy_(affine(3)[0])
        bn.bias.copy_(affine(3)[1])
        bn.running_mean.copy_(running_stats(3)[0])
        bn.running_var.copy_(running_stats(3)[1])
    scale, shift = layout_only(R.kb_batch_norm_scale_shift, bn.eval())
    x = sample(2, 3, 4, 5)
    with torch.no_grad():
        assert_matches(x * scale.view(3, 1, 1) + shift.view(3, 1, 1), bn(x))
    no_affine = nn.BatchNorm1d(3, affine=False).eval()
    scale, shift = layout_only(R.kb_batch_norm_scale_shift, no_affine)
    assert_matches(scale, torch.full((3,), 1 / (1 + 1e-5) ** 0.5))
    assert_matches(shift, torch.zeros(3))
    with pytest.raises(NotImplementedError, match="running statistics"):
        R.kb_batch_norm_scale_shift(nn.BatchNorm1d(3, track_running_stats=False))


def twins(theirs_cls, ours_cls, *args, **kwargs):
    """torch's module and ours with the same randomized parameters and running statistics."""
    theirs = theirs_cls(*args, **kwargs)
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.copy_(torch.rand(parameter.shape) + 0.5)
        if getattr(theirs, "running_mean", None) is not None:
            theirs.running_mean.copy_(torch.randn(theirs.running_mean.shape))
            theirs.running_var.copy_(torch.rand(theirs.running_var.shape) + 0.5)
    ours = ours_cls(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def check_module(theirs, ours, x, steps=1):
    """Same outputs and same buffers after each step (train-mode steps update them)."""
    for _ in range(steps):
        with torch.no_grad():
            expected = theirs(x)
        assert_matches(layout_only(ours, x), expected)
        for name, buffer in theirs.named_buffers():
            assert_matches(dict(ours.named_buffers())[name], buffer)


@pytest.mark.parametrize(
    "theirs_cls, ours_cls, args, shape",
    [
        (nn.Softmax, R.KbSoftmax, (1,), (2, 3, 4)),
        (nn.LogSoftmax, R.KbLogSoftmax, (-1,), (2, 3, 4)),
        (nn.Softmin, R.KbSoftmin, (0,), (2, 3, 4)),
        (nn.LayerNorm, R.KbLayerNorm, ((3, 4),), (2, 3, 4)),
        (nn.RMSNorm, R.KbRMSNorm, (4,), (2, 3, 4)),
        (nn.GroupNorm, R.KbGroupNorm, (2, 4), (2, 4, 3)),
    ],
)
def test_stateless_modules_match_torch(theirs_cls, ours_cls, args, shape):
    check_module(*twins(theirs_cls, ours_cls, *args), sample(*shape))


BATCH_NORMS = [(nn.BatchNorm1d, R.KbBatchNorm1d, (2, 3)),
               (nn.BatchNorm1d, R.KbBatchNorm1d, (2, 3, 4)),
               (nn.BatchNorm2d, R.KbBatchNorm2d, (2, 3, 2, 3)),
               (nn.BatchNorm3d, R.KbBatchNorm3d, (2, 3, 2, 2, 3))]  # fmt: skip
BN_OPTIONS = [{}, {"momentum": None}, {"affine": False}, {"track_running_stats": False}]


@pytest.mark.parametrize("theirs_cls, ours_cls, shape", BATCH_NORMS)
@pytest.mark.parametrize("options", BN_OPTIONS)
def test_batch_norm_modules_train_and_eval_as_torch(theirs_cls, ours_cls, shape, options):
    theirs, ours = twins(theirs_cls, ours_cls, 3, **options)
    check_module(theirs, ours, sample(*shape), steps=2)  # num_batches_tracked counts to 2
    check_module(theirs.eval(), ours.eval(), sample(*shape, seed=1))


INSTANCE_NORMS = [(nn.InstanceNorm1d, R.KbInstanceNorm1d, (2, 3, 5)),
                  (nn.InstanceNorm1d, R.KbInstanceNorm1d, (3, 5)),  # unbatched
                  (nn.InstanceNorm2d, R.KbInstanceNorm2d, (2, 3, 2, 3)),
                  (nn.InstanceNorm3d, R.KbInstanceNorm3d, (2, 3, 2, 2, 3))]  # fmt: skip
IN_OPTIONS = [{}, {"affine": True}, {"track_running_stats": True, "momentum": 0.3},
              {"affine": True, "track_running_stats": True, "momentum": None}]  # fmt: skip


@pytest.mark.parametrize("theirs_cls, ours_cls, shape", INSTANCE_NORMS)
@pytest.mark.parametrize("options", IN_OPTIONS)
def test_instance_norm_modules_train_and_eval_as_torch(theirs_cls, ours_cls, shape, options):
    theirs, ours = twins(theirs_cls, ours_cls, 3, **options)
    check_module(theirs, ours, sample(*shape))
    check_module(theirs.eval(), ours.eval(), sample(*shape, seed=1))
