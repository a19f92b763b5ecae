"""The composition root: the one place that builds an engine (problem, backend, generator, store)
from a session, for `kernelbrain run/resume/show` and the bench."""

from __future__ import annotations

import time
from dataclasses import replace

from engine.search.engine import Engine
from engine.session.lock import EngineLock
from engine.session.settings import SessionSettings
from engine.session.store import Store, StoreError
from engine.session_files import SessionPaths


def make_generator(settings: SessionSettings, problem):
    if settings.generator == "replay":
        from engine.generate.replay import ReplayGenerator

        return ReplayGenerator(settings.replay_from)
    if settings.generator == "offline":
        from engine.generate.offline import OfflineGenerator

        return OfflineGenerator(problem, settings.backend)
    from engine.generate.llm import LLMGenerator

    return LLMGenerator(settings.model, api_base=settings.api_base)


def load_session_problem(settings: SessionSettings, spec: str):
    """The problem `spec` names, posed under the session's precision policy and torch operators."""
    from engine.problems import load_problem

    problem = load_problem(spec, settings.precision_policy)
    return replace(problem, allowed_torch_ops=settings.allowed_torch_ops)


def create_session(paths: SessionPaths, wanted: SessionSettings) -> SessionSettings:
    """Check everything that can fail before any budget is spent, then write the new session.
    `wanted.problem` is a built-in name or a file, its backend may be auto and its ladder empty;
    what is stored (and returned) names the problem and its file, the backend it resolved to and
    the ladder (the default one unless given), with the session's name and creation time."""
    from engine.search.rungs import default_ladder

    problem = load_session_problem(wanted, wanted.problem)
    wanted = resolve_devices(wanted)
    settings = replace(
        wanted,
        problem=problem.name,
        problem_path=str(problem.path),
        ladder=wanted.ladder or tuple(default_ladder(problem, wanted.backend)),
        session=paths.name,
        created_at=time.time(),
    )
    make_generator(settings, problem).preflight()
    if paths.database.exists():
        raise StoreError(
            f"session {paths.name} exists already: `kernelbrain resume {paths.name}`, "
            "or choose another --session name"
        )
    paths.root.mkdir(parents=True, exist_ok=True)
    Store.create(paths.database, settings).close()
    return settings


def resolve_devices(wanted: SessionSettings) -> SessionSettings:
    """`wanted` with its backend (auto made concrete) and its devices (--gpus) resolved."""
    from engine.backends import resolve_backend, resolve_gpus

    backend = resolve_backend(wanted.backend, wanted.ray)
    gpus = wanted.gpus
    if isinstance(gpus, str):
        gpus = resolve_gpus(gpus, backend, wanted.ray)
    return replace(wanted, backend=backend, gpus=gpus)


def start_backends(wanted: SessionSettings) -> tuple[SessionSettings, list]:
    """The backends that `wanted` asks for, started before its problem is loaded: their judges'
    imports and runner templates (seconds) then overlap the problem's load and trace instead of
    following them. Returns `wanted` resolved (resolve_devices) with them."""
    from engine.backends import make_backends

    wanted = resolve_devices(wanted)
    return wanted, make_backends(wanted.backend, wanted.gpus, wanted.ray)


def resume_session(paths: SessionPaths, backends: list | None = None) -> Engine:
    """The engine of an existing session, holding its lock (taken before the file is opened).
    `backends`: those start_backends started for it (the caller's to close if this raises), else
    they are made here."""
    from engine.backends import make_backends

    lock = EngineLock(paths)
    lock.acquire()
    store = None
    try:
        store = Store(paths.database)
        settings = store.settings()
        problem = load_session_problem(settings, settings.problem_path)
        generator = make_generator(settings, problem)
        generator.preflight()
        backends = backends or make_backends(settings.backend, settings.gpus, settings.ray)
    except BaseException:
        if store is not None:
            store.close()
        lock.release()
        raise
    return Engine(paths, store, problem, backends[0], generator, settings, lock, backends)


def open_view(paths: SessionPaths) -> Engine:
    """A read-only engine over a stopped session, for show/export/ls (no backend, no generator)."""
    store = Store(paths.database, read_only=True)
    return Engine(paths, store, None, None, None, store.settings())
