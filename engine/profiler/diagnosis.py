"""Turn one profiled launch's ncu metrics into a bottleneck diagnosis in plain language.

The raw row must come from `ncu --print-units base` (durations in ns, bytes in bytes). The tags
are the symptom names of hints.base.SYMPTOMS, which strategies match against.
"""

from __future__ import annotations

import re

from engine.profiler.csvparse import KernelDetails, RuleResult, dropped_metrics

# ncu's own SOLBottleneck rule: compute and memory throughput below 60% of peak "typically
# indicate latency issues"; at or above it, that unit is the one to relieve.
NEAR_CEILING_PCT = 60.0
# 32 threads x 16-byte (128-bit) loads fill 16 sectors of 32 bytes: the most a fully coalesced
# warp request can touch. More means the warp's addresses are scattered.
COALESCED_SECTORS_PER_REQUEST = 16.0
# Achieved occupancy under this share of theoretical: a gap that scheduling overhead alone does
# not explain (load imbalance across blocks, a partial last wave, early-exiting warps).
ACHIEVED_SHARE_LOW = 0.7
# More DRAM bytes than this multiple of the minimum means data is read or written more than once.
MULTI_PASS_RATIO = 1.3
# How many stall reasons to report.
TOP_STALLS = 3

DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
L1_PCT = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2_PCT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
WAVES = "launch__waves_per_multiprocessor"
REGISTERS = "launch__registers_per_thread"
SM_COUNT = "launch__sm_count"
GRID_BLOCKS = "launch__grid_size"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_RATE = "dram__bytes.sum.per_second"
# Spilled-register traffic, from the most to the least specific source ncu offers.
SPILLS = ("derived__local_spilling_requests", "sass__inst_executed_register_spilling")
GLOBAL_SECTORS = (
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
)
GLOBAL_REQUESTS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
)
# Blocks per SM allowed by each resource; the smallest one limits occupancy.
OCCUPANCY_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps (block size)": "launch__occupancy_limit_warps",
    "blocks per SM": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}
LIMITER_TAGS = {"registers": "occupancy-registers", "shared memory": "occupancy-shared"}
STALL_COLUMN = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
# "selected" is the cycle a warp issues: not a stall.
NOT_A_STALL = {"selected"}
STALL_WORDS = {
    "long_scoreboard": "waiting on global/local memory (long scoreboard)",
    "lg_throttle": "global/local memory queue full (lg throttle)",
    "barrier": "waiting at a barrier",
    "membar": "waiting on a memory barrier",
    "short_scoreboard": "waiting on shared memory or special math (short scoreboard)",
    "mio_throttle": "shared-memory/special-math queue full (mio throttle)",
    "math_pipe_throttle": "math pipe busy",
    "wait": "fixed-latency dependency (wait)",
    "not_selected": "eligible but another warp issued (not selected)",
    "no_instruction": "instruction cache miss (no instruction)",
    "branch_resolving": "resolving a branch",
    "dispatch_stall": "dispatch stall",
    "tex_throttle": "texture queue full",
    "drain": "draining memory writes at exit",
}
# Why an under-utilised kernel is so, in a few words for its one-line summary.
REASON_WORDS = {
    "few-waves": "fewer than one wave of blocks",
    "occupancy-registers": "occupancy limited by registers",
    "occupancy-shared": "occupancy limited by shared memory",
    "low-achieved-occupancy": "achieved occupancy far below theoretical",
    "register-spills": "register spills",
    "stall-memory": "warps mostly wait on memory",
    "stall-sync": "warps mostly wait at barriers",
}
STALL_TAGS = {
    "long_scoreboard": "stall-memory",
    "lg_throttle": "stall-memory",
    "barrier": "stall-sync",
    "membar": "stall-sync",
}


def number(row: dict, name: str) -> float | None:
    value = row.get(name)
    return value if isinstance(value, float) else None


def first_number(row: dict, names: tuple[str, ...]) -> float | None:
    return next((v for v in (number(row, n) for n in names) if v is not None), None)


def total(row: dict, names: tuple[str, ...]) -> float | None:
    values = [number(row, n) for n in names]
    return sum(values) if all(v is not None for v in values) else None


def dram_bytes(row: dict, duration_s: float | None) -> float | None:
    """Bytes read and written in DRAM; from the rate and the duration if not counted directly."""
    counted = total(row, (DRAM_READ, DRAM_WRITE))
    if counted is not None:
        return counted
    rate = number(row, DRAM_RATE)
    return rate * duration_s if rate is not None and duration_s else None


def sectors_per_request(row: dict) -> float | None:
    sectors, requests = total(row, GLOBAL_SECTORS), total(row, GLOBAL_REQUESTS)
    return sectors / requests if sectors is not None and requests else None


def stall_shares(row: dict) -> list[list]:
    """[[reason, share of all stall cycles], ...], the largest first."""
    stalls = {}
    for column, value in row.items():
        match = STALL_COLUMN.match(column)
        if match and match.group(1) not in NOT_A_STALL and isinstance(value, float) and value > 0:
            stalls[match.group(1)] = value
    cycles = sum(stalls.values())
    ranked = sorted(stalls.items(), key=lambda item: -item[1])
    return [[reason, round(value / cycles, 3)] for reason, value in ranked]


def occupancy_limiter(row: dict) -> tuple[str, float] | None:
    """The resource that allows the fewest blocks per SM, with that number of blocks."""
    limits = {what: number(row, column) for what, column in OCCUPANCY_LIMITS.items()}
    limits = {what: blocks for what, blocks in limits.items() if blocks is not None}
    if not limits:
        return None
    what = min(limits, key=limits.get)
    return what, limits[what]


def rule_hints(details: KernelDetails | None) -> list[dict]:
    """ncu's rule findings, the largest estimated speedup first."""
    rules: list[RuleResult] = details.rules if details else []
    hints = [
        {
            "rule": r.rule,
            "type": r.type,
            "text": r.description,
            "estimated_speedup": r.estimated_speedup,
        }
        for r in rules
    ]
    return sorted(hints, key=lambda h: -(h["estimated_speedup"] or -1.0))


def multi_pass_line(measured_bytes: float | None, bytes_min: float | None) -> str | None:
    """Evidence that DRAM traffic exceeds the problem's minimum, or None."""
    if not measured_bytes or not bytes_min or measured_bytes <= bytes_min * MULTI_PASS_RATIO:
        return None
    return (
        f"DRAM moved {measured_bytes / 1e6:.1f} MB, {measured_bytes / bytes_min:.2f}x the "
        f"{bytes_min / 1e6:.1f} MB that the inputs and outputs need: data crosses DRAM more "
        "than once (a second pass over the input, or an intermediate written and read back)"
    )


def pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}%"


def classify(m: dict) -> tuple[str, str]:
    """(kind, summary) from the speed-of-light figures."""
    dram, sm = m["dram_pct"] or 0.0, m["sm_pct"] or 0.0
    caches = max(m["memory_pct"] or 0.0, m["l1_pct"] or 0.0, m["l2_pct"] or 0.0)
    rate = f" ({m['dram_tbps']:.2f} TB/s)" if m["dram_tbps"] is not None else ""
    if dram >= NEAR_CEILING_PCT and dram >= sm:
        return "memory-bound", (
            f"memory-bound: DRAM at {dram:.1f}% of peak{rate} while the SMs are {sm:.1f}% busy; "
            "only moving fewer bytes makes it faster"
        )
    if sm >= NEAR_CEILING_PCT:
        return "compute-bound", (
            f"compute-bound: SM throughput at {sm:.1f}% of peak, DRAM at {dram:.1f}%; fewer or "
            "cheaper instructions (or tensor cores) make it faster"
        )
    if caches >= NEAR_CEILING_PCT:
        return "cache-bound", (
            f"cache-bound: the memory pipes are {caches:.1f}% busy (L1 {pct(m['l1_pct'])}, "
            f"L2 {pct(m['l2_pct'])}) but DRAM only {dram:.1f}%: data is re-read through the "
            "caches; reuse it from registers or shared memory"
        )
    spr = m["sectors_per_request"]
    if spr is not None and spr > COALESCED_SECTORS_PER_REQUEST:
        return "cache-bound", (
            f"cache-bound: uncoalesced accesses, {spr:.1f} sectors per request (at most "
            f"{COALESCED_SECTORS_PER_REQUEST:.0f} when coalesced); make neighbouring threads "
            "touch neighbouring addresses"
        )
    return "under-utilised", (
        f"under-utilised: neither memory (DRAM {dram:.1f}%) nor compute (SM {sm:.1f}%) is near "
        "its ceiling"
    )


def collect_metrics(row: dict, duration_s: float | None) -> dict:
    duration_ns = number(row, DURATION)
    seconds = duration_ns * 1e-9 if duration_ns is not None else duration_s
    moved = dram_bytes(row, seconds)
    rate = number(row, DRAM_RATE)
    if rate is None and moved is not None and seconds:
        rate = moved / seconds
    return {
        "dram_pct": number(row, DRAM_PCT),
        "sm_pct": number(row, SM_PCT),
        "memory_pct": number(row, MEMORY_PCT),
        "l1_pct": number(row, L1_PCT),
        "l2_pct": number(row, L2_PCT),
        "achieved_occupancy": number(row, ACHIEVED_OCCUPANCY),
        "theoretical_occupancy": number(row, THEORETICAL_OCCUPANCY),
        "waves_per_sm": number(row, WAVES),
        "registers_per_thread": number(row, REGISTERS),
        "spill_requests": first_number(row, SPILLS),
        "sectors_per_request": sectors_per_request(row),
        "duration_us": seconds * 1e6 if seconds is not None else None,
        "dram_bytes": moved,
        "dram_tbps": rate / 1e12 if rate is not None else None,
        "grid": row.get("Grid Size"),
        "block": row.get("Block Size"),
    }


def reasons(row: dict, m: dict, stalls: list[list]) -> list[tuple[str, str]]:
    """(tag, evidence) for each secondary finding that holds."""
    found = []
    waves, blocks, sms = m["waves_per_sm"], number(row, GRID_BLOCKS), number(row, SM_COUNT)
    limiter = occupancy_limiter(row)
    if waves is not None and waves < 1:
        per_sm = f" x {limiter[1]:.0f} blocks per SM" if limiter else ""
        size = f"grid of {blocks:.0f} blocks " if blocks is not None else "grid "
        sm_text = f" ({sms:.0f} SMs{per_sm})" if sms is not None else ""
        found.append(
            ("few-waves", f"{size}fills {waves:.2f} of one wave{sm_text}: some SMs sit idle")
        )
    theoretical, achieved = m["theoretical_occupancy"], m["achieved_occupancy"]
    if limiter and theoretical is not None and theoretical < 100:
        what, per_sm = limiter
        tag = LIMITER_TAGS.get(what)
        line = (
            f"theoretical occupancy {theoretical:.0f}%, limited by {what} to {per_sm:.0f} "
            f"blocks per SM"
        )
        if what == "registers" and m["registers_per_thread"] is not None:
            line += f" ({m['registers_per_thread']:.0f} registers per thread)"
        found.append((tag, line))
    if (
        theoretical is not None
        and achieved is not None
        and achieved < theoretical * ACHIEVED_SHARE_LOW
    ):
        found.append(
            (
                "low-achieved-occupancy",
                f"achieved occupancy {achieved:.1f}% against {theoretical:.0f}% theoretical: "
                "warps finish unevenly or the last wave is partial",
            )
        )
    if m["spill_requests"]:
        found.append(
            (
                "register-spills",
                f"{m['spill_requests']:.0f} local-memory spill requests: registers spill "
                "(smaller tiles or fewer live values)",
            )
        )
    if m["sectors_per_request"] is not None and (
        m["sectors_per_request"] > COALESCED_SECTORS_PER_REQUEST
    ):
        found.append(("uncoalesced", f"{m['sectors_per_request']:.1f} sectors per global request"))
    if stalls:
        reason, share = stalls[0]
        found.append(
            (
                STALL_TAGS.get(reason),
                f"top warp stall: {STALL_WORDS.get(reason, reason)}, {share:.0%} of stall cycles",
            )
        )
    return found


def diagnose(
    raw_row: dict,
    details: KernelDetails | None,
    requested_metrics: list[str] | tuple[str, ...],
    bytes_min: float | None = None,
    duration_s: float | None = None,
) -> dict:
    """Diagnose one launch. `bytes_min`: the least DRAM traffic the problem needs; `duration_s`:
    the launch's time when the row lacks gpu__time_duration."""
    m = collect_metrics(raw_row, duration_s)
    stalls = stall_shares(raw_row)[:TOP_STALLS]
    kind, summary = classify(m)
    evidence = [
        f"DRAM throughput {pct(m['dram_pct'])} of peak"
        + (f", {m['dram_tbps']:.2f} TB/s" if m["dram_tbps"] is not None else ""),
        f"SM throughput {pct(m['sm_pct'])}; memory pipes {pct(m['memory_pct'])} "
        f"(L1 {pct(m['l1_pct'])}, L2 {pct(m['l2_pct'])})",
        f"occupancy: achieved {pct(m['achieved_occupancy'])} of theoretical "
        f"{pct(m['theoretical_occupancy'])}; {m['waves_per_sm']} waves per SM",
    ]
    if m["duration_us"] is not None:
        evidence.append(f"duration {m['duration_us']:.2f} us, grid {m['grid']}, block {m['block']}")
    tags = [kind]
    for tag, line in reasons(raw_row, m, stalls):
        evidence.append(line)
        if tag and tag not in tags:
            tags.append(tag)
    if kind == "under-utilised" and (why := [REASON_WORDS[t] for t in tags if t in REASON_WORDS]):
        summary += "; because of " + ", ".join(why)
    if line := multi_pass_line(m["dram_bytes"], bytes_min):
        evidence.append(line)
        tags.append("multi-pass")
    return {
        "status": "ok",
        "kind": kind,
        "summary": summary,
        "evidence": evidence,
        "tags": tags,
        "metrics": m,
        "stalls": stalls,
        "rule_hints": rule_hints(details),
        "missing_metrics": dropped_metrics(requested_metrics, list(raw_row)),
        "kernel": raw_row.get("Kernel Name"),
    }
