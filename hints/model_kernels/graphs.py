"""A model's forward replayed as a CUDA graph: at a small batch a whole model is dozens of short
kernels, and the host's work for each launch outlasts the GPU's. The first call of a signature
(the tensors' shapes, strides, dtypes and devices, the other arguments' values, training and
autograd modes) runs forward once as written on the graph's own inputs, which compiles its
kernels, then captures it into a graph; that call and every one after it copy their inputs into
the graph's own, replay the graph and return copies of its outputs (the next replay overwrites
the graph's). So a timing's warm-up call pays the capture, never a timed one. (When the second
call captured, rung 0 on an H100, one warm-up call and five timed, gave graphed candidates a cv
of 0.4-1.6, and the ladder promoted slower candidates over them: 0.52x over 2.34x.)

Forward runs as written, always, on the CPU, with autograd recording, in training mode, for
arguments that are not tensors or plain values, and while a torch function mode is active (the
judge's checks of a call, a profiler's mode, `with torch.device(...)` or a default device set):
a replay would hide the call's work from the mode, and a capture would take the mode's own work
into the graph. A graph reads the parameters where they were at its capture: changes in place
(`load_state_dict`, `copy_`) show, parameters replaced by new tensors do not. One graph at a
time: a new signature's capture drops the last."""

import torch
from torch.overrides import has_torch_function

_graphs_PLAIN = (bool, int, float, str, type(None))


def _graphs_signature(module, values):
    """What a graph is kept for, or None where forward must run as written."""
    if module.training or torch.is_grad_enabled():
        return None
    signature, on_gpu = [], False
    for value in values:
        if isinstance(value, torch.Tensor):
            on_gpu = on_gpu or value.device.type == "cuda"
            signature.append((value.shape, value.stride(), value.dtype, value.device))
        elif isinstance(value, _graphs_PLAIN):
            signature.append((type(value), value))
        else:
            return None
    return tuple(signature) if on_gpu else None


def _graphs_copy(out):
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_graphs_copy(o) for o in out)
    if isinstance(out, dict):
        return {key: _graphs_copy(value) for key, value in out.items()}
    return out


class _graphs_Replay:
    """forward captured once for a signature's inputs, replayed on copies of later ones."""

    def __init__(self, forward, values, keywords):
        self.forward, self.keywords = forward, keywords
        self.inputs = [torch.empty_like(v) if isinstance(v, torch.Tensor) else v for v in values]
        self._copy_in(values)
        # Once as written on the graph's own inputs first: a kernel specialized for their
        # addresses (16-byte alignment) compiles and loads here, never inside the capture.
        self._call(self.inputs)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.outputs = self._call(self.inputs)

    def _copy_in(self, values):
        for static, value in zip(self.inputs, values, strict=True):
            if isinstance(static, torch.Tensor):
                static.copy_(value)

    def _call(self, values):
        split = len(values) - len(self.keywords)
        keywords = dict(zip(self.keywords, values[split:], strict=True))
        return self.forward(*values[:split], **keywords)

    def __call__(self, values):
        self._copy_in(values)
        self.graph.replay()
        return _graphs_copy(self.outputs)


def kb_graphed(module, forward, /, *args, **kwargs):
    """forward(*args, **kwargs) of `module`, replayed as a CUDA graph where it may be."""
    values = (*args, *kwargs.values())
    signature = _graphs_signature(module, values)
    if signature is None or has_torch_function(values):
        return forward(*args, **kwargs)
    kept = getattr(module, "_kb_graph", None)
    if kept is not None and kept[0] == signature:
        return kept[1](values)
    module._kb_graph = None  # the last signature's graph and its memory go first
    graphed = _graphs_Replay(forward, values, tuple(kwargs))
    module._kb_graph = (signature, graphed)
    return graphed(values)
