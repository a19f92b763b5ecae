"""The composite candidate: one standalone module whose ModelNew sends each call, by its input
shapes, to the member kernel that measured best at that shape (an exact-shape table, then the
nearest known shape by log-size distance, then the default: the best geometric mean).

The members' sources are merged with the ast only (hints.core.merge: nothing here runs them), each
member's top-level names suffixed apart and module-level imports shared. The composite's
ModelNew subclasses the default member's, so its parameters (and state_dict) are the default's;
the other members are held outside the module tree, built with the same constructor arguments,
and given the same weights when a state_dict that fits them is loaded.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from engine.jobs import source_sha256
from hints.core.merge import MergeError as CompositeError  # the members cannot be merged
from hints.core.merge import body_lines, call_arguments, merge_modules, method_args

ORIGIN = "composite"
# The names the composite itself defines at module level: members' names never take them.
RESERVED = frozenset(
    "ModelNew COMPOSITE_ROUTES composite_key composite_distance composite_member".split()
)


HEADER = "# A composite of per-shape winners: ModelNew sends each call, by its input shapes, to"
MEMBER_LINE = re.compile(r"^# member (\d+): \S+, sha256 ([0-9a-f]{64})$", re.MULTILINE)
ROUTE_LINE = re.compile(r"^    \(.*\): (\d+),  # ([^:\s]+)", re.MULTILINE)


@dataclass(frozen=True)
class Member:
    id: str
    source: str


@dataclass(frozen=True)
class Route:
    """Calls whose inputs have `inputs` (a shape per tensor argument, None for any other
    argument) go to member `member`: it measured best at size `label`."""

    label: str
    inputs: tuple
    member: int
    note: str = ""


def input_key(spec: list) -> tuple:
    """A problem's input spec ([shape or None, ...]) as the key the composite computes."""
    return tuple(None if s is None else tuple(s) for s in spec)


def composite_source(members: list[Member], routes: list[Route]) -> str:
    """The composite module's source; members[0] is the default (the best geometric mean)."""
    if len(members) < 2:
        raise CompositeError("a composite needs at least two members")
    merged = merge_modules([(m.id, m.source) for m in members], RESERVED)
    signatures = [
        (new.name, method_args(new, "__init__"), method_args(new, "forward"))
        for new in merged.classes
    ]
    imports = merged.imports
    for name in ("math", "torch"):
        imports.require(name)
    parts = [
        HEADER,
        "# the member that measured best at that shape (exact shapes, then the nearest, then the",
        f"# default: {members[0].id}, the best geometric mean).",
        *imports.lines(),
    ]
    for i, (m, body) in enumerate(zip(members, merged.bodies, strict=True)):
        parts += ["", "", f"# member {i}: {m.id}, sha256 {source_sha256(m.source)}"]
        parts += body_lines(body)
    parts += ["", "", *_dispatch(routes, len(members)), "", "", *_model_new(signatures)]
    source = "\n".join(parts) + "\n"
    ast.parse(source)  # what we wrote must parse: anything else is a bug here
    return source


def _positional(args: ast.arguments) -> str:
    """The tuple of a method's positional arguments (without `self`), as source."""
    items = [p.arg for p in [*args.posonlyargs, *args.args][1:]]
    items += [f"*{args.vararg.arg}"] if args.vararg else []
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _dispatch(routes: list[Route], members: int) -> list[str]:
    table = {}
    lines = ["# Input shapes of each target size -> the member that measured best there."]
    lines.append("COMPOSITE_ROUTES = {")
    for r in routes:
        if not 0 <= r.member < members:
            raise CompositeError(f"route {r.label} names member {r.member} of {members}")
        if r.inputs in table:
            continue  # two sizes with the same inputs: the first one's winner serves both
        table[r.inputs] = r.member
        lines.append(f"    {r.inputs!r}: {r.member},  # {r.label}{': ' if r.note else ''}{r.note}")
    lines += ["}", "", "", *DISPATCH_FUNCTIONS]
    return lines


DISPATCH_FUNCTIONS = '''\
def composite_key(args):
    """The shape of each tensor argument (None for any other argument)."""
    return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args)


def composite_distance(key, known):
    """Log-size distance between two keys of the same structure; None when they differ."""
    if len(key) != len(known):
        return None
    total = 0.0
    for mine, theirs in zip(key, known):
        if mine is None or theirs is None:
            if mine is not theirs:
                return None
            continue
        if len(mine) != len(theirs):
            return None
        for a, b in zip(mine, theirs):
            total += abs(math.log(max(a, 1)) - math.log(max(b, 1)))
    return total


def composite_member(key):
    """The member for a call: the exact shape's winner, else the nearest known shape's, else
    the default (member 0)."""
    member = COMPOSITE_ROUTES.get(key)
    if member is not None:
        return member
    best, nearest = 0, None
    for known, candidate in COMPOSITE_ROUTES.items():
        distance = composite_distance(key, known)
        if distance is not None and (nearest is None or distance < nearest):
            best, nearest = candidate, distance
    return best'''.splitlines()


def _model_new(signatures) -> list[str]:
    (base, init, forward), others = signatures[0], signatures[1:]
    members = ", ".join(f"{name}({call_arguments(init, i)})" for name, i, _ in others)
    own = ast.unparse(init)
    fwd = ast.unparse(forward)
    calls = []
    for k, (_, _, f) in enumerate(others, start=1):
        call = f"self.composite_members[{k - 1}]({call_arguments(forward, f)})"
        calls += [f"        if member == {k}:", f"            return {call}"]
    return [
        f"class ModelNew({base}):",
        '    """Member 0 with its parameters registered (its state_dict is this module\'s); the',
        '    others are held outside the module tree and share the weights a load gives."""',
        "",
        f"    def __init__({own}):",
        f"        super().__init__({call_arguments(init, init)})",
        f"        self.composite_members = ({members},)",
        "",
        f"    def forward({fwd}):",
        f"        member = composite_member(composite_key({_positional(forward)}))",
        *calls,
        f"        return super().forward({call_arguments(forward, forward)})",
        "",
        "    def load_state_dict(self, state_dict, *args, **kwargs):",
        "        loaded = super().load_state_dict(state_dict, *args, **kwargs)",
        "        for other in self.composite_members:",
        "            mine = other.state_dict()",
        "            if mine.keys() == state_dict.keys() and all(",
        "                mine[k].shape == state_dict[k].shape for k in mine",
        "            ):",
        "                other.load_state_dict(state_dict, *args, **kwargs)",
        "        return loaded",
        "",
        "    def _apply(self, fn, *args, **kwargs):",
        "        for other in getattr(self, 'composite_members', ()):",
        "            other._apply(fn, *args, **kwargs)",
        "        return super()._apply(fn, *args, **kwargs)",
        "",
        "    def train(self, mode=True):",
        "        for other in getattr(self, 'composite_members', ()):",
        "            other.train(mode)",
        "        return super().train(mode)",
    ]


def routed_members(source: str) -> tuple[str, dict[str, str]] | None:
    """(the default member's sha256, {size label: its winner's sha256}) read back from a
    composite's source (the sim backend times a composite as its members); None for a source
    that is not a composite."""
    if not source.startswith(HEADER):
        return None
    shas = {int(i): sha for i, sha in MEMBER_LINE.findall(source)}
    routes = {label: shas[int(i)] for i, label in ROUTE_LINE.findall(source)}
    return shas[0], routes
