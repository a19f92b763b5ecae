"""The bench's results: one row per (problem, size), one ablation entry per problem."""

from __future__ import annotations

from engine.bench.floors import Work, floor_ms
from engine.bench.measure import SizeTimes
from engine.bench.searches import SearchOutcome
from engine.gate.precision import DTYPE_PRECISION, infer_precision
from engine.jobs import source_sha256
from engine.problems import Problem
from engine.search.score import geometric_mean
from engine.timing.stats import speedup_interval, summarize

BEST, FLAT_BEST = "best", "flat_best"  # the candidates' names in the timing request


def timed(samples: list[float] | None) -> dict | None:
    """Median and bootstrap 95% interval of the median, in ms."""
    if not samples:
        return None
    s = summarize(samples)
    return {"median": s.median, "low": s.ci_low, "high": s.ci_high, "cv": s.cv}


def speedups(times: SizeTimes, name: str) -> tuple:
    """(x eager, its interval, x compile, its interval) of candidate `name`. Each ratio comes
    from samples timed in one process: the candidate against the reference timed beside it by
    the judge; torch.compile against eager in the timing process; x compile is their product
    (its interval the product of the intervals' ends)."""
    cand, judged = times.samples.get(name), times.judged_eager.get(name)
    if not cand or not judged:
        return None, None, None, None
    x_eager, (low, high) = speedup_interval(judged, cand)
    eager, compiled = times.samples.get("eager"), times.samples.get("compile")
    if not eager or not compiled:
        return x_eager, [low, high], None, None
    eager_per_compile, (c_low, c_high) = speedup_interval(compiled, eager)
    return x_eager, [low, high], x_eager * eager_per_compile, [low * c_low, high * c_high]


def timing_sources(ladder: SearchOutcome, flat: SearchOutcome | None) -> dict[str, str]:
    """The candidates to time: the ladder's best, and the flat search's best when it differs."""
    sources = {BEST: ladder.best_source} if ladder.best_source else {}
    if (
        flat
        and flat.best_source
        and (
            not ladder.best_source
            or source_sha256(flat.best_source) != source_sha256(ladder.best_source)
        )
    ):
        sources[FLAT_BEST] = flat.best_source
    return sources


def flat_name(flat: SearchOutcome, sources: dict[str, str]) -> str | None:
    """Under which name the flat search's best was timed (None: it found none)."""
    if flat.best_source is None:
        return None
    return FLAT_BEST if FLAT_BEST in sources else BEST


def shape_text(problem: Problem, size) -> str:
    """A size as its integer parameters ("4096x393216"); for a file without SIZES, which has
    none, its tensor inputs' shapes ("128x3x32x32, 64x3x3x3")."""
    dims = [v for v in size.params.values() if isinstance(v, int)]
    if dims:
        return "x".join(map(str, dims))
    shapes = problem.input_specs.get(size.label, [])
    return ", ".join("x".join(map(str, shape)) for shape in shapes if shape is not None)


def problem_rows(
    problem: Problem, search: SearchOutcome, work: dict[str, Work], times: dict[str, SizeTimes],
    ceilings: dict,
) -> list[dict]:  # fmt: skip
    rows = []
    for label, t in times.items():
        size, w = problem.size(label), work[label]
        precision = None
        if search.best_source:
            precision = infer_precision(search.best_source, w.input_dtype)
        floor = floor_ms(w, ceilings, precision or DTYPE_PRECISION.get(w.input_dtype, "fp32"))
        best = timed(t.samples.get(BEST))
        speedup_eager, eager_ci, speedup_compile, compile_ci = speedups(t, BEST)
        notes = dict(t.errors)
        if search.best_source is None:
            notes[BEST] = f"the search found no passing candidate ({search.stop_reason})"
            if search.rejections:
                notes[BEST] += f"; {search.rejections}"
        rows.append({
            "problem": problem.name,
            "size": label,
            "shape": shape_text(problem, size),
            "dtype": w.input_dtype,
            "precision": precision,
            "precision_policy": problem.precision_policy,
            "eager_ms": timed(t.samples.get("eager")),
            "compile_ms": timed(t.samples.get("compile")),
            "best_ms": best,
            "judged_eager_ms": timed(t.judged_eager.get(BEST)),
            "compile_seconds": t.compile_seconds,
            "floor_ms": floor,
            "bytes": w.bytes,
            "flops": w.matmul_flops + w.other_flops,
            "speedup_eager": speedup_eager,
            "speedup_eager_ci": eager_ci,
            "speedup_compile": speedup_compile,
            "speedup_compile_ci": compile_ci,
            "fraction_of_floor": floor / best["median"] if best else None,
            "gpu_seconds_to_best": search.gpu_seconds_to_best,
            "gpu_seconds_total": search.gpu_seconds_total,
            "best_candidate": search.best_id,
            "session": search.session,
            "notes": notes,
        })  # fmt: skip
    return rows


def ablation_entry(
    problem: Problem, ladder: SearchOutcome, flat: SearchOutcome, sources: dict[str, str],
    times: dict[str, SizeTimes],
) -> dict:  # fmt: skip
    """Flat against ladder: GPU-seconds to the best, and each one's best kernel timed."""
    ladder_ms = {label: timed(t.samples.get(BEST)) for label, t in times.items()}
    flat_key = flat_name(flat, sources)
    flat_ms = {label: timed(t.samples.get(flat_key)) for label, t in times.items()}
    ratios = [
        ladder_ms[label]["median"] / flat_ms[label]["median"]
        for label in times
        if ladder_ms[label] and flat_ms[label]
    ]
    to_best = (ladder.gpu_seconds_to_best, flat.gpu_seconds_to_best)
    return {
        "problem": problem.name,
        "precision_policy": problem.precision_policy,
        "ladder_session": ladder.session,
        "flat_session": flat.session,
        "ladder_gpu_seconds_to_best": to_best[0],
        "flat_gpu_seconds_to_best": to_best[1],
        "gpu_seconds_to_best_ratio": to_best[0] / to_best[1]
        if None not in to_best and to_best[1]
        else None,
        "ladder_gpu_seconds_total": ladder.gpu_seconds_total,
        "flat_gpu_seconds_total": flat.gpu_seconds_total,
        "ladder_evaluations": ladder.evaluations,
        "flat_evaluations": flat.evaluations,
        "ladder_best_candidate": ladder.best_id,
        "flat_best_candidate": flat.best_id,
        "same_best_kernel": flat_key == BEST,
        "ladder_best_ms": ladder_ms,
        "flat_best_ms": flat_ms,
        # Geometric mean over sizes of ladder best / flat best: <= 1 when the ladder's is as fast.
        "best_ms_ratio": geometric_mean(ratios) if ratios and len(ratios) == len(times) else None,
    }
