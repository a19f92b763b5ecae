"""The composition root: the one place that builds an engine (problem, backend, generator, store)
from a session, for `kernelbrain run/resume/show` and the bench."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, replace

from engine.jobs import RungSpec
from engine.search.engine import Engine
from engine.session.lock import EngineLock
from engine.session.store import Store, StoreError
from engine.session_files import SessionPaths


def make_generator(meta: dict, problem):
    if meta["generator"] == "replay":
        from engine.generate.replay import ReplayGenerator

        return ReplayGenerator(meta["replay_from"])
    if meta["generator"] == "offline":
        from engine.generate.offline import OfflineGenerator

        return OfflineGenerator(problem)
    from engine.generate.llm import LLMGenerator

    return LLMGenerator(meta["model"], api_base=meta.get("api_base"))


def create_session(
    paths: SessionPaths,
    problem_spec: str,
    backend_name: str,
    generator: str,
    seed: int,
    limits: dict,
    model: str | None = None,
    api_base: str | None = None,
    ladder: list[RungSpec] | None = None,
    replay_from: str | None = None,
    precision_policy: str = "strict",
    allowed_torch_ops: tuple[str, ...] = (),
) -> None:
    """Check everything that can fail before any budget is spent, then write the new session.
    `ladder` replaces the default ladder; generator "replay" replays the candidates of the
    session folder `replay_from` (the bench's flat-versus-ladder ablation); `precision_policy`
    is one of engine.problems.PRECISION_POLICIES and `allowed_torch_ops` the torch operators
    forward may compute with, both kept for the session's whole life."""
    from engine.backends import resolve_backend
    from engine.problems import load_problem
    from engine.search.rungs import default_ladder

    problem = replace(load_problem(problem_spec, precision_policy),
                      allowed_torch_ops=tuple(allowed_torch_ops))  # fmt: skip
    backend_name = resolve_backend(backend_name)
    meta = {
        "session": paths.name,
        "problem": problem.name,
        "problem_path": str(problem.path),
        "backend": backend_name,
        "generator": generator,
        "model": model,
        "api_base": api_base,
        "replay_from": replay_from,
        "seed": seed,
        "precision_policy": precision_policy,
        "allowed_torch_ops": list(allowed_torch_ops),
        "limits": limits,
        "ladder": [asdict(r) for r in ladder or default_ladder(problem, backend_name)],
        "created_at": time.time(),
    }
    gen = make_generator(meta, problem)
    gen.preflight()
    if paths.database.exists():
        raise StoreError(
            f"session {paths.name} exists already: `kernelbrain resume {paths.name}`, "
            "or choose another --session name"
        )
    paths.root.mkdir(parents=True, exist_ok=True)
    Store.create(paths.database, meta).close()


def ladder_of(meta: dict) -> list[RungSpec]:
    return [RungSpec(**{**r, "size_labels": tuple(r["size_labels"])}) for r in meta["ladder"]]


def resume_session(paths: SessionPaths) -> Engine:
    """The engine of an existing session, holding its lock (taken before the file is opened)."""
    from engine.backends import make_backend
    from engine.problems import load_problem

    lock = EngineLock(paths)
    lock.acquire()
    store = None
    try:
        store = Store(paths.database)
        meta = store.meta()
        problem = replace(load_problem(meta["problem_path"], meta["precision_policy"]),
                          allowed_torch_ops=tuple(meta["allowed_torch_ops"]))  # fmt: skip
        gen = make_generator(meta, problem)
        gen.preflight()
        meta["engine_pid"] = os.getpid()
        backend = make_backend(meta["backend"])
    except BaseException:
        if store is not None:
            store.close()
        lock.release()
        raise
    return Engine(paths, store, problem, backend, gen, ladder_of(meta), meta, lock)


def open_view(paths: SessionPaths) -> Engine:
    """A read-only engine over a stopped session, for show/export/ls (no backend, no generator)."""
    store = Store(paths.database, read_only=True)
    meta = store.meta()
    return Engine(paths, store, None, None, None, ladder_of(meta), meta)
