"""Tests run on CPUs: Triton kernels that a test runs in its own process go through the
interpreter, which Triton reads when a kernel is defined, so it is set before any import. Sim
evaluations take no wall time (a demonstration's takes a GPU's), in the engines tests start
too."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("KERNELBRAIN_SIM_PACE", "0")
