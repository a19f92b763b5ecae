"""Timing: interleaved measurement inside a worker (bench) and robust statistics (stats)."""
