"""Tests run on CPUs: Triton kernels that a test runs in its own process go through the
interpreter, which Triton reads when a kernel is defined, so it is set before any import."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
