"""Fusions of the whole-model family (hints.model_source decides where): a convolution with the
batch norm after it (folded while in eval mode), a residual add and an activation in one launch;
a linear layer with its activation in one launch; and a Sequential whose runs of such modules
launch so. Training-mode batch norm takes the unfused path."""

import torch.nn as nn

from hints.model_kernels.common import KB_FUSED_ACTIVATIONS, KB_FUSED_LINEAR
from hints.model_kernels.conv import kb_conv_fused
from hints.model_kernels.elementwise import kb_add
from hints.model_kernels.matmul import kb_linear_act
from hints.model_kernels.reductions import kb_batch_norm_scale_shift

_fusion_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_fusion_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _fusion_activation(act):
    """The epilogue's name of an activation (a module or a kb_ launcher; "none" for None), or
    None where no epilogue computes it."""
    if act is None:
        return "none"
    if getattr(act, "approximate", "none") != "none":
        return None
    if isinstance(act, nn.Module):
        name = type(act).__name__.lower().removeprefix("kb")
    else:
        name = getattr(act, "__name__", "").removeprefix("kb_")
    return name if name in KB_FUSED_ACTIVATIONS else None


def kb_model_conv(x, conv, bn=None, residual=None, act=None):
    """act(bn(conv(x)) + residual), each part optional but the convolution: one kb_conv_fused
    launch where the batch norm has fixed statistics (eval mode), else one step at a time."""
    name = _fusion_activation(act)
    if name is not None and (bn is None or not bn.training and bn.running_mean is not None):
        scale, shift = (None, None) if bn is None else kb_batch_norm_scale_shift(bn)
        return kb_conv_fused(x, conv, scale, shift, residual, name)
    y = conv(x)
    y = y if bn is None else bn(y)
    y = y if residual is None else kb_add(y, residual)
    return y if act is None else act(y)


def kb_model_linear(x, linear, act):
    """act(linear(x)): one kb_linear_act launch for the activations its epilogue has."""
    name = _fusion_activation(act)
    if name in KB_FUSED_LINEAR:
        return kb_linear_act(x, linear.weight, linear.bias, name)
    return act(linear(x))


def _fusion_sequential_step(modules, k, x):
    """modules[k] run on x, with the modules after it that fuse into its launch: (output, index
    of the next module to run)."""
    first, rest = modules[k], modules[k + 1 :]
    if isinstance(first, _fusion_CONVS):
        bn = rest[0] if rest and isinstance(rest[0], _fusion_BATCH_NORMS) else None
        after = rest[1:] if bn is not None else rest
        act = after[0] if after and _fusion_activation(after[0]) not in (None, "none") else None
        return kb_model_conv(x, first, bn, None, act), k + 1 + (bn is not None) + (act is not None)
    if isinstance(first, nn.Linear) and rest and _fusion_activation(rest[0]) in KB_FUSED_LINEAR:
        return kb_model_linear(x, first, rest[0]), k + 2
    return first(x), k + 1


class KbSequential(nn.Sequential):
    """nn.Sequential whose convolution, batch norm and activation (or linear layer and
    activation) in a row launch as one."""

    def forward(self, input):
        modules, k = list(self), 0
        while k < len(modules):
            input, k = _fusion_sequential_step(modules, k, input)
        return input
