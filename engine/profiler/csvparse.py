"""Parse Nsight Compute's CSV output (`--csv --page raw` and `--page details`) by column name."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

# ncu prints these instead of a number when a metric has no value for a launch.
NO_VALUE = {"n/a", "no data", ""}
NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d*)(\.\d+)?([eE][-+]?\d+)?$")


class NcuCsvError(ValueError):
    """ncu output that is not the CSV we asked for."""


@dataclass
class RawPage:
    """The raw page: one row per profiled launch, every metric a column, and each column's unit."""

    columns: list[str]
    units: dict[str, str]
    rows: list[dict[str, float | str | None]]


@dataclass(frozen=True)
class DetailMetric:
    section: str  # e.g. "GPU Speed Of Light Throughput"
    name: str  # e.g. "DRAM Throughput"
    unit: str
    value: float | str | None


@dataclass(frozen=True)
class RuleResult:
    """One of ncu's rule findings, e.g. SOLBottleneck or AchievedOccupancy."""

    section: str
    rule: str
    type: str  # OPT (optimization), INF, WRN or ERR
    description: str
    speedup_type: str  # "local" or "global" (to the kernel or to the whole workload)
    estimated_speedup: float | None  # percent of the kernel's time ncu estimates could be saved


@dataclass
class KernelDetails:
    """The details page of one profiled launch."""

    launch_id: int
    kernel_name: str
    metrics: list[DetailMetric] = field(default_factory=list)
    rules: list[RuleResult] = field(default_factory=list)


def parse_value(text: str) -> float | str | None:
    """A number as float (thousands separators dropped), n/a as None, anything else as text."""
    text = text.strip()
    if text.lower() in NO_VALUE:
        return None
    if NUMBER.match(text) and any(c.isdigit() for c in text):
        return float(text.replace(",", ""))
    return text


def csv_records(text: str) -> list[list[str]]:
    """The CSV records from the header on, skipping ==PROF==, ==WARNING== and other log lines."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith('"ID",'):
            return list(csv.reader(lines[index:]))
    first = next((line for line in lines if line.strip()), "(empty output)")
    raise NcuCsvError(
        f'no ncu CSV header (a line starting with "ID",) in the output; first line: {first[:200]}'
    )


def parse_raw(text: str) -> RawPage:
    """Parse `ncu --csv --page raw`: header, a units row, then one row per launch."""
    records = csv_records(text)
    header = records[0]
    if len(records) < 2:
        raise NcuCsvError("ncu raw page has a header but no units row: was --page raw used?")
    units = dict(zip(header, records[1], strict=False))
    rows = [
        {name: parse_value(cell) for name, cell in zip(header, record, strict=False)}
        for record in records[2:]
        if any(cell.strip() for cell in record)
    ]
    return RawPage(columns=header, units=units, rows=rows)


def parse_details(text: str) -> list[KernelDetails]:
    """Parse `ncu --csv --page details`: metric rows and rule rows, grouped by launch."""
    records = csv_records(text)
    header = records[0]
    for needed in ("ID", "Kernel Name", "Section Name", "Metric Name", "Rule Name"):
        if needed not in header:
            raise NcuCsvError(
                f"ncu details page lacks the column {needed!r}: was --page details used?"
            )
    kernels: dict[int, KernelDetails] = {}
    for record in records[1:]:
        row = dict(zip(header, record, strict=False))
        if not row.get("ID", "").strip():
            continue
        launch_id = int(parse_value(row["ID"]))
        kernel = kernels.setdefault(launch_id, KernelDetails(launch_id, row["Kernel Name"]))
        if row.get("Rule Name"):
            kernel.rules.append(
                RuleResult(
                    section=row["Section Name"],
                    rule=row["Rule Name"],
                    type=row.get("Rule Type", ""),
                    description=row.get("Rule Description", ""),
                    speedup_type=row.get("Estimated Speedup Type", ""),
                    estimated_speedup=as_number(parse_value(row.get("Estimated Speedup", ""))),
                )
            )
        elif row.get("Metric Name"):
            kernel.metrics.append(
                DetailMetric(
                    section=row["Section Name"],
                    name=row["Metric Name"],
                    unit=row.get("Metric Unit", ""),
                    value=parse_value(row.get("Metric Value", "")),
                )
            )
    return [kernels[key] for key in sorted(kernels)]


def as_number(value: float | str | None) -> float | None:
    return value if isinstance(value, float) else None


def dropped_metrics(requested: list[str] | tuple[str, ...], columns: list[str]) -> list[str]:
    """Requested metrics that ncu left out of the raw page without an error."""
    present = set(columns)
    return [name for name in requested if name not in present]
