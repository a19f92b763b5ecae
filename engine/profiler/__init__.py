"""Nsight Compute: the profile of one candidate launch and the bottleneck diagnosis made from it,
and the census of every kernel a forward call launches."""

from engine.profiler.diagnosis import diagnose
from engine.profiler.ncu import census, ncu_status, profile

__all__ = ["census", "diagnose", "ncu_status", "profile"]
