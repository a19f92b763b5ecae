"""Evaluations in Ray actors, for fleets (`--ray local` or `--ray ADDRESS`): one actor per device,
holding one GPU (`num_gpus=1`) on cuda and one CPU on cpu and sim. An actor builds, on the node
it lands on, the backend a local device would have (on cpu and cuda its judge, which starts every
candidate in a sandboxed runner), and receives only the problem and the candidates. The engine,
the session and its one DuckDB writer stay on the machine that runs the engine.

An actor that dies (its node lost, its process killed) takes its evaluation in flight with it:
`RayDevice` starts another and raises `DeviceLost`, and the engine re-runs the evaluation and says
so in the event log.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from engine.backends.devices import RERUNS, DeviceLost
from engine.errors import SetupError
from engine.jobs import EvalJob, EvalResult
from engine.problems import Problem

LOCAL = "local"  # --ray local: a Ray instance started by the engine, ended with it
RAY_HELP = (
    "evaluate in Ray actors, one per device: 'local' starts a Ray instance on this machine, an "
    "address (HOST:PORT, or 'auto' for the cluster this machine belongs to) joins a cluster "
    "whose nodes have KernelBrain installed; --gpus is then a count or 'all' (Ray places the "
    "actors); needs the extra: pip install -e '.[ray]'"
)
CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 300.0  # an actor waits this long for a free device (a node joining) at most


def connect(address: str) -> None:
    """Join (or, for LOCAL, start) the Ray instance once per process; SetupError says what to
    do when Ray is missing or the cluster cannot be reached."""
    try:
        import ray
    except ImportError:
        raise SetupError(
            "--ray needs Ray, an optional extra: pip install -e '.[ray]' (or pip install ray)"
        ) from None
    if ray.is_initialized():
        return
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    try:
        if address == LOCAL:
            ray.init(**options)
        else:
            refuse_unreachable(address)  # ray.init would retry an unreachable address for minutes
            ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SetupError(
            f"--ray {address}: could not reach a Ray cluster there ({exc}); start one with "
            "`ray start --head` and give its address (HOST:PORT), or use --ray local"
        ) from exc


def refuse_unreachable(address: str) -> None:
    """ConnectionError unless HOST:PORT accepts a connection within CONNECT_TIMEOUT_S (other
    forms, 'auto' and ray:// among them, are Ray's to find)."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port}: {exc}") from exc


def cluster_gpus() -> int:
    import ray

    return int(ray.cluster_resources().get("GPU", 0))


def resources(backend: str) -> dict:
    """What one device's actor holds: a GPU on cuda, a CPU otherwise."""
    return {"num_gpus": 1, "num_cpus": 0} if backend == "cuda" else {"num_cpus": 1}


class DeviceActor:
    """One device's backend on a Ray node (made a Ray actor class by `RayDevice`)."""

    def __init__(self, backend: str):
        import ray

        if backend == "sim":
            from engine.backends.sim import SimBackend

            self.backend = SimBackend()
        else:
            from engine.backends.local import LocalBackend

            gpu = int(ray.get_gpu_ids()[0]) if backend == "cuda" else 0
            self.backend = LocalBackend(device=backend, gpu=gpu)
        self.folder = Path(tempfile.mkdtemp(prefix="kb-ray-problem-"))
        self.problems: dict[str, Problem] = {}
        self.problems_lock = threading.Lock()  # a prepare and an evaluation arrive at once

    def describe(self) -> dict:
        """Where this actor runs (node id, process id), and its backend's traits."""
        import ray

        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "timings_meaningful": self.backend.timings_meaningful,
            "profile_seconds": self.backend.profile_seconds,
        }

    def local(self, problem: Problem) -> Problem:
        """`problem` with its file written on this node (the engine's path may not exist here)."""
        with self.problems_lock:
            known = self.problems.get(problem.source)
            if known is None or known.allowed_torch_ops != problem.allowed_torch_ops:
                path = Path(tempfile.mkdtemp(prefix="problem", dir=self.folder)) / problem.path.name
                path.write_text(problem.source)
                known = self.problems[problem.source] = replace(problem, path=path)
            return known

    def evaluate(self, problem: Problem, job: EvalJob) -> EvalResult:
        return self.backend.evaluate(self.local(problem), job)

    def prepare(self, problem: Problem, sources: list[str], labels) -> None:
        self.backend.prepare(self.local(problem), sources, labels)

    def census(self, problem: Problem, source: str, labels, result: EvalResult) -> EvalResult:
        self.backend.census(self.local(problem), source, labels, result)
        return result

    def close(self) -> None:
        self.backend.close()


class RayDevice:
    """The backend the engine holds for one device: every call goes to this device's actor."""

    def __init__(self, backend: str, device: int):
        self.name = backend
        self.device = device
        self._start()

    def _start(self) -> None:
        import ray
        from ray.exceptions import GetTimeoutError

        actor_class = ray.remote(DeviceActor)
        # Two calls at once: a prepare (compiling ahead) beside an evaluation, as locally.
        self.actor = actor_class.options(max_concurrency=2, **resources(self.name)).remote(
            self.name
        )
        try:
            described = ray.get(self.actor.describe.remote(), timeout=START_TIMEOUT_S)
        except GetTimeoutError:
            ray.kill(self.actor)
            needs = "a GPU" if self.name == "cuda" else "a CPU"
            raise SetupError(
                f"device {self.device}: no Ray node offered {needs} within "
                f"{START_TIMEOUT_S:g} s (the cluster has {ray.cluster_resources()}); ask for "
                "fewer --gpus or add nodes"
            ) from None
        self.node, self.pid = described["node"], described["pid"]
        self.timings_meaningful = described["timings_meaningful"]
        self.profile_seconds = described["profile_seconds"]

    def _call(self, method: str, *args):
        import ray
        from ray.exceptions import RayActorError

        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except RayActorError as exc:
            lost = self.node[:12]
            self._start()
            raise DeviceLost(
                f"device {self.device}'s Ray worker on node {lost} was lost "
                f"({type(exc).__name__}); a new one started on node {self.node[:12]}"
            ) from exc

    def evaluate(self, problem: Problem, job: EvalJob) -> EvalResult:
        return self._call("evaluate", problem, job)

    def prepare(self, problem: Problem, sources: list[str], labels) -> None:
        self.actor.prepare.remote(problem, sources, labels)  # not waited for, as locally

    def census(self, problem: Problem, source: str, labels, result: EvalResult) -> None:
        for attempt in range(RERUNS + 1):  # a census lost with its node is run again
            try:
                found = self._call("census", problem, source, labels, result)
                break
            except DeviceLost:
                if attempt == RERUNS:
                    raise
        result.__dict__.update(found.__dict__)

    def close(self) -> None:
        import ray
        from ray.exceptions import RayActorError

        try:
            ray.get(self.actor.close.remote())
        except RayActorError:
            pass  # gone already: nothing left to end
        ray.kill(self.actor)


def ray_backends(backend: str, count: int) -> list[RayDevice]:
    return [RayDevice(backend, device) for device in range(count)]
