"""Budgets (`30m`, `2h`, `600gpu-s`, `200evals`, `$5`) and the ledger of what a search spent."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.errors import KernelBrainError
from engine.jobs import CPU_ACTIVITIES, GPU_ACTIVITIES

LIMIT_KINDS = ("wall_seconds", "gpu_seconds", "evaluations", "llm_usd")

_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
_PATTERNS = (
    # Device seconds: a GPU's, or on the cpu backend the CPU's (which says `device-s`).
    (re.compile(r"^(\d+(?:\.\d+)?)\s*(gpu-s|gpu-sec|gpus|device-s|device-sec)$"), "gpu_seconds"),
    (re.compile(r"^(\d+)\s*evals?$"), "evaluations"),
    (re.compile(r"^\$(\d+(?:\.\d+)?)$"), "llm_usd"),
    (re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)$"), "wall_seconds"),
)


ACCEPTED_BUDGETS = (
    "use wall time (30m, 2h, 90s), GPU- or device-seconds (600gpu-s or 600device-s, the same), "
    "evaluations (200evals) or LLM dollars ($5); several at once are separated by commas"
)


class BudgetError(KernelBrainError, ValueError):
    pass


def parse_budget_item(text: str) -> tuple[str, float]:
    """One budget term, e.g. `30m` -> ("wall_seconds", 1800); zero or less is refused."""
    text = text.strip()
    item = text.lower()
    if item.startswith("-") and _matches(item[1:]):
        raise BudgetError(f"budget {text!r} is below zero: give a limit above zero, e.g. 30m")
    for pattern, kind in _PATTERNS:
        m = pattern.match(item)
        if m:
            value = float(m.group(1))
            if value <= 0:
                raise BudgetError(
                    f"budget {text!r} allows nothing: give a limit above zero, e.g. 30m"
                )
            if kind == "wall_seconds":
                value *= _UNITS[m.group(2)]
            return kind, value
    raise BudgetError(f"cannot read budget {text!r}: {ACCEPTED_BUDGETS}")


def _matches(item: str) -> bool:
    return any(pattern.match(item) for pattern, _ in _PATTERNS)


def parse_budget(texts: list[str]) -> dict[str, float]:
    """Limits from `--budget` texts; at least one is needed (no limit at all is refused)."""
    limits: dict[str, float] = {}
    for text in texts:
        for part in filter(None, (p.strip() for p in text.split(","))):
            kind, value = parse_budget_item(part)
            limits[kind] = value
    if not limits:
        raise BudgetError(f"the budget {', '.join(texts)!r} is empty: {ACCEPTED_BUDGETS}")
    return limits


def parse_budget_increase(text: str) -> tuple[str, float]:
    """`+10m`, `+100evals`: how much to raise one limit by (the engine raises only the limits a
    session has: adding budget never creates one, which would shorten the run)."""
    text = text.strip()
    if not text.startswith("+"):
        raise BudgetError(f"budget increase {text!r} must start with '+', e.g. +10m or +50evals")
    return parse_budget_item(text[1:])


@dataclass
class Ledger:
    """What the search has spent, stored with every step's checkpoint. The GPU-seconds and the
    evaluation count are sums over the stored evaluations; wall time and the LLM's tokens,
    requests and cost are counted here only.

    GPU-seconds count only time the GPU was held (the judge's reference, checks, timing,
    profiles); compiling is CPU work and counts against wall time alone; idle is the wall time
    that went to neither (the engine's own steps, the generator). Time the search stood paused
    (by the user or by machine faults, nothing in flight) is kept apart in paused_seconds: a
    pause spends no budget, wall time included."""

    gpu_seconds_by_rung: dict[str, float] = field(default_factory=dict)
    gpu_seconds_by_activity: dict[str, float] = field(
        default_factory=lambda: {a: 0.0 for a in GPU_ACTIVITIES}
    )
    cpu_seconds_by_activity: dict[str, float] = field(
        default_factory=lambda: {"compile": 0.0}  # "precompile" too, once a worker compiled
    )
    gpu_seconds_by_device: dict[str, float] = field(default_factory=dict)
    evaluations_by_device: dict[str, int] = field(default_factory=dict)
    llm_tokens_in: int = 0
    llm_tokens_out: int = 0
    llm_cost_usd: float = 0.0
    llm_requests: int = 0
    wall_seconds: float = 0.0
    evaluations: int = 0
    paused_seconds: float = 0.0  # wall time spent paused: in no budget, wall_seconds included

    @property
    def gpu_seconds(self) -> float:
        return sum(self.gpu_seconds_by_activity.values())

    @property
    def idle_seconds(self) -> float:
        """Wall time spent on neither GPU work nor compiling the GPU waited for (the compile
        workers' time overlaps the GPU's)."""
        busy = self.gpu_seconds + self.cpu_seconds_by_activity.get("compile", 0.0)
        return max(0.0, self.wall_seconds - busy)

    def charge_evaluation(self, rung: int, by_activity: dict[str, float], device: int = 0) -> float:
        """Count one evaluation, run on `device`; returns the GPU-seconds it spent."""
        self.evaluations += 1
        key = str(device)
        self.evaluations_by_device[key] = self.evaluations_by_device.get(key, 0) + 1
        return self.charge_census(rung, by_activity)

    def charge_census(self, rung: int, by_activity: dict[str, float]) -> float:
        """Count seconds by activity at `rung` (alone, the census of the search's answer: not
        an evaluation); returns the GPU-seconds among them."""
        for activity, seconds in by_activity.items():
            on_cpu = activity in CPU_ACTIVITIES
            book = self.cpu_seconds_by_activity if on_cpu else self.gpu_seconds_by_activity
            book[activity] = book.get(activity, 0.0) + seconds
        spent = sum(s for a, s in by_activity.items() if a not in CPU_ACTIVITIES)
        key = str(rung)
        self.gpu_seconds_by_rung[key] = self.gpu_seconds_by_rung.get(key, 0.0) + spent
        return spent

    def charge_device(self, device: int, gpu_seconds: float) -> None:
        key = str(device)
        self.gpu_seconds_by_device[key] = self.gpu_seconds_by_device.get(key, 0.0) + gpu_seconds

    def charge_generation(self, tokens_in: int, tokens_out: int, cost_usd: float, requests: int):
        self.llm_tokens_in += tokens_in
        self.llm_tokens_out += tokens_out
        self.llm_cost_usd += cost_usd
        self.llm_requests += requests

    def spent(self, kind: str) -> float:
        return {
            "wall_seconds": self.wall_seconds,
            "gpu_seconds": self.gpu_seconds,
            "evaluations": self.evaluations,
            "llm_usd": self.llm_cost_usd,
        }[kind]

    def exhausted(self, limits: dict[str, float]) -> str | None:
        """The first limit spent, or None."""
        for kind in LIMIT_KINDS:
            if kind in limits and self.spent(kind) >= limits[kind]:
                return kind
        return None

    def left(self, limits: dict[str, float]) -> dict[str, float | None]:
        return {
            kind: (max(0.0, limits[kind] - self.spent(kind)) if kind in limits else None)
            for kind in LIMIT_KINDS
        }

    def share(self, gpu_seconds: float) -> float:
        """What fraction of all GPU-seconds `gpu_seconds` is."""
        return gpu_seconds / self.gpu_seconds if self.gpu_seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {**self.__dict__}

    @classmethod
    def from_dict(cls, d: dict) -> Ledger:
        """A stored ledger; one stored before compiling was counted apart has its compile
        seconds among the GPU-seconds: they move to the CPU's; one stored before devices were
        counted spent them all on device 0 (its evaluations by device are counted in the store:
        Store.evaluations_by_device)."""
        d = {**d, "gpu_seconds_by_activity": dict(d["gpu_seconds_by_activity"])}
        if "cpu_seconds_by_activity" not in d:
            compile_s = d["gpu_seconds_by_activity"].pop("compile", 0.0)
            d["cpu_seconds_by_activity"] = {"compile": compile_s}
        ledger = cls(**d)
        if "gpu_seconds_by_device" not in d:
            ledger.gpu_seconds_by_device = {"0": ledger.gpu_seconds}
        return ledger
