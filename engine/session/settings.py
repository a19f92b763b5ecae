"""A session's settings: chosen when it is created and kept for its whole life, one row each in
the meta table of state.duckdb (the format of the untyped dict that came before, so that every
existing session still loads)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from engine.jobs import RungSpec


@dataclass(frozen=True)
class SessionSettings:
    problem: str  # the problem's name (when creating: a built-in name or a KernelBench file)
    backend: str  # sim, cpu or cuda (when creating: also auto)
    seed: int
    limits: dict[str, float] = field(default_factory=dict)  # the budget it starts with
    generator: str = "offline"  # offline, llm or replay
    model: str | None = None  # llm: the litellm model string
    api_base: str | None = None  # llm: an OpenAI-compatible server
    replay_from: str | None = None  # replay: the session folder whose candidates it replays
    precision_policy: str = "strict"  # one of engine.problems.PRECISION_POLICIES
    allowed_torch_ops: tuple[str, ...] = ()  # torch operators forward may compute with
    ladder: tuple[RungSpec, ...] = ()  # (when creating: empty for the default ladder)
    gpus: tuple[int, ...] = (0,)  # the devices evaluations run on, one backend each
    # (when creating: --gpus as given, resolved by engine.backends.resolve_gpus)
    ray: str | None = None  # evaluate in Ray actors: "local" or a cluster's address
    problem_path: str = ""  # the file the problem is loaded from at every resume
    session: str = ""  # the session's name when it was created
    created_at: float = 0.0

    def to_meta(self) -> dict:
        """The meta table's rows: field name to a JSON-ready value."""
        return asdict(self)

    @classmethod
    def from_meta(cls, meta: dict) -> SessionSettings:
        """The settings in a meta table; a session made before a field existed reads as its
        default (precision_policy strict, allowed_torch_ops none)."""
        known = {k: v for k, v in meta.items() if k in {f.name for f in fields(cls)}}
        ladder = tuple(RungSpec(**{**r, "size_labels": tuple(r["size_labels"])})
                       for r in known.pop("ladder"))  # fmt: skip
        ops = tuple(known.pop("allowed_torch_ops", ()))
        gpus = tuple(known.pop("gpus", (0,)))
        return cls(**known, ladder=ladder, allowed_torch_ops=ops, gpus=gpus)
