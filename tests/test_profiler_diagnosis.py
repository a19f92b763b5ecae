"""The ncu CSV parser and the diagnosis, on output recorded on the H200 (tests/data/ncu)."""

from pathlib import Path

import pytest

from engine.profiler.csvparse import (
    NcuCsvError,
    RawPage,
    dropped_metrics,
    parse_details,
    parse_raw,
    parse_value,
)
from engine.profiler.diagnosis import diagnose
from engine.profiler.ncu import REQUESTED_METRICS, diagnose_range
from hints.base import SYMPTOMS

DATA = Path(__file__).parent / "data" / "ncu"
RAW_TEXT = (DATA / "h200_rmsnorm_raw.csv").read_text()
DETAILS_TEXT = (DATA / "h200_rmsnorm_details.csv").read_text()


@pytest.fixture
def row() -> dict:
    return dict(parse_raw(RAW_TEXT).rows[0])


@pytest.fixture
def details():
    return parse_details(DETAILS_TEXT)[0]


# --- parser -------------------------------------------------------------------------------------


def test_raw_page_skips_log_lines_and_reads_the_units_row():
    assert RAW_TEXT.startswith("==WARNING==")  # the recording does start with log lines
    page = parse_raw(RAW_TEXT)
    assert page.columns[:5] == ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name"]
    assert len(page.rows) == 1
    assert page.units["gpu__time_duration.sum"] == "ns"
    assert page.units["dram__bytes.sum.per_second"] == "byte/s"
    assert page.rows[0]["Kernel Name"] == "kb_rmsnorm_dim1"


def test_raw_values_drop_thousands_separators_and_keep_text(row):
    assert row["launch__grid_size"] == 1216.0
    assert row["launch__thread_count"] == 155648.0
    assert row["gpu__time_duration.sum"] == 229760.0
    assert row["dram__bytes.sum.per_second"] == pytest.approx(4_070_206_128_133.70)
    assert row["Grid Size"] == "(19, 64, 1)"
    assert row["launch__func_cache_config"] == "CachePreferNone"


def test_missing_values_become_none(row):
    assert row["derived__local_spilling_requests_pct"] is None  # "no data" in the recording
    edited = RAW_TEXT.replace('"229,760"', '"n/a"', 1)
    assert parse_raw(edited).rows[0]["gpu__time_duration.avg"] is None
    assert [parse_value(t) for t in ("n/a", "", "1,234.5", "-3e2", "12,34")] == [
        None,
        None,
        1234.5,
        -300.0,
        "12,34",
    ]


def test_output_without_a_csv_header_is_a_clear_error():
    with pytest.raises(NcuCsvError, match="no ncu CSV header.*==PROF== No kernels were profiled"):
        parse_raw("==PROF== No kernels were profiled.\n")


def test_details_page_splits_metrics_from_rules(details):
    assert details.kernel_name == "kb_rmsnorm_dim1"
    by_name = {(m.section, m.name): m for m in details.metrics}
    dram = by_name[("GPU Speed Of Light Throughput", "DRAM Throughput")]
    assert (dram.unit, dram.value) == ("%", 84.59)
    assert by_name[("GPU Speed Of Light Throughput", "Duration")].value == 229760.0
    assert by_name[("Launch Statistics", "Grid Size")].value == 1216.0
    assert [r.rule for r in details.rules] == [
        "SOLBottleneck",
        "IssueSlotUtilization",
        "CPIStall",
        "CPIStall",
        "CPIStall",
        "AchievedOccupancy",
    ]
    issue = details.rules[1]
    assert (issue.type, issue.speedup_type, issue.estimated_speedup) == ("OPT", "local", 15.41)
    assert details.rules[0].estimated_speedup is None


def test_details_group_rows_by_launch():
    lines = DETAILS_TEXT.splitlines()
    second = [line.replace('"0","667"', '"1","667"', 1) for line in lines if line.startswith('"0"')]
    kernels = parse_details("\n".join(lines + second))
    assert [k.launch_id for k in kernels] == [0, 1]
    assert len(kernels[0].metrics) == len(kernels[1].metrics)


def test_dropped_metrics_are_those_requested_but_absent():
    columns = parse_raw(RAW_TEXT).columns
    asked = ["gpu__time_duration.sum", "made_up__bytes.sum", "dram__bytes_read.sum"]
    assert dropped_metrics(asked, columns) == ["made_up__bytes.sum", "dram__bytes_read.sum"]


# --- diagnosis of the recorded kernel -----------------------------------------------------------


def test_recorded_rmsnorm_is_memory_bound(row, details):
    d = diagnose(row, details, REQUESTED_METRICS)
    m = d["metrics"]
    assert (d["status"], d["kind"], d["tags"][0]) == ("ok", "memory-bound", "memory-bound")
    assert round(m["dram_pct"], 1) == 84.6
    assert round(m["dram_tbps"], 2) == 4.07
    assert round(m["sm_pct"], 1) == 6.2
    assert 54 <= m["achieved_occupancy"] <= 56
    assert m["theoretical_occupancy"] == 100
    assert m["duration_us"] == pytest.approx(229.76)
    assert m["waves_per_sm"] == 0.58
    assert m["registers_per_thread"] == 30
    assert m["spill_requests"] == 0
    assert m["dram_bytes"] == pytest.approx(4.0702e12 * 229.76e-6, rel=1e-3)
    assert (m["grid"], m["block"]) == ("(19, 64, 1)", "(128, 1, 1)")
    assert "84.6%" in d["summary"] and "4.07 TB/s" in d["summary"]
    assert d["kernel"] == "kb_rmsnorm_dim1"
    assert d["stalls"][0][0] == "long_scoreboard" and d["stalls"][0][1] > 0.9
    assert len(d["stalls"]) == 3
    assert set(d["tags"]) <= set(SYMPTOMS)


def test_recorded_kernel_reports_the_metrics_ncu_did_not_give(row, details):
    d = diagnose(row, details, [*REQUESTED_METRICS, "made_up__metric.sum"])
    assert "made_up__metric.sum" in d["missing_metrics"]
    assert "dram__bytes_read.sum" in d["missing_metrics"]  # not requested in that recording
    assert "gpu__time_duration.sum" not in d["missing_metrics"]


def test_rule_hints_come_sorted_by_estimated_speedup(row, details):
    hints = diagnose(row, details, REQUESTED_METRICS)["rule_hints"]
    assert [h["rule"] for h in hints[:3]] == [
        "IssueSlotUtilization",
        "CPIStall",
        "AchievedOccupancy",
    ]
    assert [h["estimated_speedup"] for h in hints[:3]] == [15.41] * 3
    assert all(h["estimated_speedup"] is None for h in hints[3:])
    assert "15.4 cycles" in hints[0]["text"]
    assert diagnose(row, None, REQUESTED_METRICS)["rule_hints"] == []


def test_multi_pass_fires_when_dram_bytes_exceed_the_minimum(row):
    moved = diagnose(row, None, ())["metrics"]["dram_bytes"]
    twice = diagnose(row, None, (), bytes_min=moved / 1.5)
    assert "multi-pass" in twice["tags"]
    assert any("1.50x" in line for line in twice["evidence"])
    assert "multi-pass" not in diagnose(row, None, (), bytes_min=moved / 1.2)["tags"]


# --- each rule on rows edited from the recorded one ---------------------------------------------


def with_metrics(row: dict, changes: dict) -> dict:
    return {**row, **changes}


def test_compute_bound(row):
    d = diagnose(
        with_metrics(
            row,
            {
                "sm__throughput.avg.pct_of_peak_sustained_elapsed": 88.0,
                "dram__throughput.avg.pct_of_peak_sustained_elapsed": 12.0,
            },
        ),
        None,
        (),
    )
    assert d["kind"] == "compute-bound" and "88.0%" in d["summary"]


def test_cache_bound_when_caches_busy_but_dram_low(row):
    d = diagnose(
        with_metrics(row, {"dram__throughput.avg.pct_of_peak_sustained_elapsed": 20.0}), None, ()
    )
    assert d["kind"] == "cache-bound"
    assert "L2 89.3%" in d["summary"] and "DRAM only 20.0%" in d["summary"]


LOW_THROUGHPUT = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 15.0,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 20.0,
    "l1tex__throughput.avg.pct_of_peak_sustained_active": 20.0,
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": 20.0,
}


def test_uncoalesced_accesses_are_cache_bound(row):
    scattered = {
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 3_200_000.0,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 0.0,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 100_000.0,
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 0.0,
    }
    d = diagnose(with_metrics(row, {**LOW_THROUGHPUT, **scattered}), None, ())
    assert d["kind"] == "cache-bound" and "uncoalesced" in d["tags"]
    assert d["metrics"]["sectors_per_request"] == 32.0
    coalesced = {**scattered, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 400_000.0}
    assert "uncoalesced" not in diagnose(with_metrics(row, coalesced), None, ())["tags"]


def test_under_utilised_with_its_reasons(row):
    d = diagnose(with_metrics(row, LOW_THROUGHPUT), None, ())
    assert d["kind"] == "under-utilised"
    assert "neither memory (DRAM 15.0%) nor compute (SM 6.2%)" in d["summary"]
    assert {"few-waves", "low-achieved-occupancy", "stall-memory"} <= set(d["tags"])
    assert d["summary"].endswith(
        "because of fewer than one wave of blocks, achieved occupancy far below theoretical, "
        "warps mostly wait on memory"
    )


def test_fewer_than_one_wave(row):
    few = diagnose(row, None, ())
    assert "few-waves" in few["tags"]
    assert any(
        "1216 blocks fills 0.58 of one wave (132 SMs x 16 blocks" in e for e in few["evidence"]
    )
    full = diagnose(with_metrics(row, {"launch__waves_per_multiprocessor": 3.2}), None, ())
    assert "few-waves" not in full["tags"]


def test_occupancy_limited_by_registers(row):
    limited = {
        "sm__maximum_warps_per_active_cycle_pct": 25.0,
        "launch__occupancy_limit_registers": 4.0,
        "launch__registers_per_thread": 128.0,
    }
    d = diagnose(with_metrics(row, limited), None, ())
    assert "occupancy-registers" in d["tags"]
    line = next(e for e in d["evidence"] if "limited by registers" in e)
    assert "theoretical occupancy 25%" in line and "128 registers per thread" in line
    # Theoretical occupancy at 100%: nothing limits it, whichever limit is smallest.
    assert "occupancy-registers" not in diagnose(row, None, ())["tags"]


def test_occupancy_limited_by_shared_memory_or_block_size(row):
    shared = {
        "sm__maximum_warps_per_active_cycle_pct": 50.0,
        "launch__occupancy_limit_shared_mem": 2.0,
    }
    assert "occupancy-shared" in diagnose(with_metrics(row, shared), None, ())["tags"]
    warps = {"sm__maximum_warps_per_active_cycle_pct": 50.0, "launch__occupancy_limit_warps": 8.0}
    d = diagnose(with_metrics(row, warps), None, ())
    assert any("limited by warps (block size) to 8 blocks" in e for e in d["evidence"])
    assert not {"occupancy-registers", "occupancy-shared"} & set(d["tags"])


def test_achieved_far_below_theoretical(row):
    assert "low-achieved-occupancy" in diagnose(row, None, ())["tags"]
    close = with_metrics(row, {"sm__warps_active.avg.pct_of_peak_sustained_active": 90.0})
    assert "low-achieved-occupancy" not in diagnose(close, None, ())["tags"]


def test_register_spills(row):
    assert "register-spills" not in diagnose(row, None, ())["tags"]
    d = diagnose(with_metrics(row, {"derived__local_spilling_requests": 4096.0}), None, ())
    assert "register-spills" in d["tags"] and d["metrics"]["spill_requests"] == 4096
    assert any("4096 local-memory spill requests" in e for e in d["evidence"])


def test_top_stall_reason_names_barriers(row):
    barrier = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
    d = diagnose(with_metrics(row, {barrier: 400.0}), None, ())
    assert d["stalls"][0][0] == "barrier" and "stall-sync" in d["tags"]
    assert "stall-memory" not in d["tags"]
    assert sum(share for _, share in d["stalls"]) <= 1.0


def test_tags_are_symptoms_for_every_edit(row):
    rows = [
        row,
        with_metrics(row, LOW_THROUGHPUT),
        with_metrics(row, {"sm__throughput.avg.pct_of_peak_sustained_elapsed": 90.0}),
        with_metrics(row, {"derived__local_spilling_requests": 1.0}),
    ]
    for r in rows:
        assert set(diagnose(r, None, (), bytes_min=1.0)["tags"]) <= set(SYMPTOMS)


# --- a forward call that launched several kernels ------------------------------------------


def test_several_launches_diagnose_the_longest_and_list_all(row):
    short = {**row, "ID": 1.0, "Kernel Name": "kb_scale", "gpu__time_duration.sum": 10_000.0}
    page = RawPage(columns=list(row), units={}, rows=[short, row])
    moved = diagnose(row, None, ())["metrics"]["dram_bytes"]
    d = diagnose_range(page, DETAILS_TEXT, bytes_min=moved / 2)
    assert d["kernel"] == "kb_rmsnorm_dim1"
    assert [k["name"] for k in d["kernels"]] == ["kb_scale", "kb_rmsnorm_dim1"]
    assert d["kernels"][0]["duration_us"] == 10.0
    assert "launched 2 kernels" in d["note"] and "kb_rmsnorm_dim1" in d["note"]
    assert d["rule_hints"], "the details of launch 0 belong to the longest kernel"
    assert "multi-pass" in d["tags"]
