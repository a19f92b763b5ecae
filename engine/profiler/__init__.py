"""Nsight Compute profiling of one candidate launch and the bottleneck diagnosis made from it."""

from engine.profiler.diagnosis import diagnose
from engine.profiler.ncu import ncu_status, profile

__all__ = ["diagnose", "ncu_status", "profile"]
