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
    from engine.backends import resolve_backend, resolve_gpus
    from engine.search.rungs import default_ladder

    problem = load_session_problem(wanted, wanted.problem)
    backend = resolve_backend(wanted.backend, wanted.ray)
    gpus = wanted.gpus
    if isinstance(gpus, str):
        gpus = resolve_gpus(gpus, backend, wanted.ray)
    settings = replace(
        wanted,
        problem=problem.name,
        problem_path=str(problem.path),
        backend=backend,
        gpus=gpus,
        ladder=wanted.ladder or tuple(default_ladder(problem, backend)),
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


def resume_session(paths: SessionPaths) -> Engine:
    """The engine of an existing session, holding its lock (taken before the file is opened)."""
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
        backends = make_backends(settings.backend, settings.gpus, settings.ray)
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
