"""Worker subprocesses that run candidates, and the engine-side client that supervises them."""

from engine.worker.client import Timeouts, WorkerClient

__all__ = ["Timeouts", "WorkerClient"]
