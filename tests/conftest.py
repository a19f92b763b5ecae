"""Tests run on CPUs: Triton kernels that a test runs in its own process go through the
interpreter, which Triton reads when a kernel is defined, so it is set before any import. Sim
evaluations take no wall time (a demonstration's takes a GPU's), in the engines tests start
too."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("KERNELBRAIN_SIM_PACE", "0")

import pytest  # noqa: E402  (after the environment it must see)


@pytest.fixture(scope="module")
def backend():
    """A cpu judge with short deadlines, for a test module's candidates."""
    from engine.backends.local import LocalBackend
    from engine.worker import Timeouts

    local = LocalBackend("cpu", timeouts=Timeouts(compile_s=30, run_s=30, time_s=60))
    yield local
    local.close()


@pytest.fixture(scope="module")
def softmax():
    from engine.problems import load_problem

    return load_problem("softmax")
