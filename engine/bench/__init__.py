"""`kernelbrain bench`: the search against PyTorch eager and torch.compile, and the ablation of
the multi-fidelity ladder against flat evaluation of the same candidate stream."""

from engine.errors import KernelBrainError


class BenchError(KernelBrainError):
    """The bench cannot go on; the message says what went wrong and what to change."""
