"""Compile-only mode, for the compile box (device "compile"): a candidate's forward runs on meta
tensors (shapes, dtypes and strides, no memory), and each Triton launch compiles its kernel for
the GPU target named in KB_COMPILE_TARGET ("cuda:90:32": backend, capability, warp size) into
Triton's cache instead of running it. No GPU is needed or reachable. (Triton is imported only on
entering the mode: the judge imports this module for its constant.)

What makes the timing runner's launch a cache hit is what Triton hashes: the kernel's source and
line numbers, the argument specialization (dtypes, 16-byte alignment of pointers, integers equal
to 1 or divisible by 16, constexpr values), the options, the target and the compiler's version.
Meta tensors report address 0, aligned like every fresh allocation on a GPU; the integers are the
target sizes' own. Whatever differs (a view at an odd offset) compiles again on the GPU, as it
would have without this mode.
"""

from __future__ import annotations

import os

TARGET_VARIABLE = "KB_COMPILE_TARGET"
# Shared memory one program may use, by compute capability. On a GPU, Triton refuses a kernel
# beyond it when it loads the kernel (OutOfResources), after compiling; here the same refusal
# comes before the candidate holds the GPU.
SHARED_BYTES = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448}


class CompileOnlyDriver:
    """What Triton's launch path asks of a driver before it compiles, answered without one."""

    def __init__(self, target):
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self):
        return self.target

    def get_active_torch_device(self):
        import torch

        return torch.device("meta")


def parse_target(text: str):
    from triton.backends.compiler import GPUTarget

    backend, arch, warp_size = text.split(":")
    return GPUTarget(backend, int(arch), int(warp_size))


def _compile_instead_of_launch(run, target):
    limit = SHARED_BYTES.get(target.arch)

    def compile_only(self, *args, grid, warmup, **kwargs):
        from triton.runtime.errors import OutOfResources

        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        shared = getattr(getattr(kernel, "metadata", None), "shared", 0)
        if limit is not None and shared > limit:
            raise OutOfResources(shared, limit, "shared memory")
        return kernel

    return compile_only


def _compile_each_config(kernel_call, quantiles=None):
    """The autotuner's benchmark, here: compile the configuration, time nothing (every
    configuration compiles, so the timing runner finds all of them in the cache). A
    configuration beyond the GPU's resources is out of the running, as the autotuner has it."""
    from triton.runtime.errors import OutOfResources

    try:
        kernel_call()
    except OutOfResources:
        return [float("inf")] * 3
    return [0.0, 0.0, 0.0]


def _tune_without_disk_cache(self, tuning_key, configs, bench_fn) -> bool:
    """A tuning result from here (every time 0) must never reach the timing runner's cache."""
    bench_fn()
    return False


def enter() -> None:
    """Switch this process to compile-only mode for the target in KB_COMPILE_TARGET."""
    from triton.runtime import driver
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    if isinstance(driver._active, CompileOnlyDriver):  # `driver.active` would look for a GPU
        return
    target = parse_target(os.environ[TARGET_VARIABLE])
    driver.set_active(CompileOnlyDriver(target))
    JITFunction.run = _compile_instead_of_launch(JITFunction.run, target)
    Autotuner.do_bench = property(lambda self: _compile_each_config)
    Autotuner.check_disk_cache = _tune_without_disk_cache
