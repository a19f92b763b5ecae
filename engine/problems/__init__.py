"""Problems: a KernelBench-format reference and its ladder of input sizes. Loading one needs
torch, so the loader is imported on first use: commands that only read session files never
pay for torch."""

from engine.problems.problem import PRECISION_POLICIES, Problem, Size

LOADER_NAMES = ("ProblemError", "builtin_names", "load_problem")

__all__ = ["PRECISION_POLICIES", "Problem", "Size", *LOADER_NAMES]


def __getattr__(name: str):
    if name in LOADER_NAMES:
        from engine.problems import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'engine.problems' has no attribute {name!r}")
