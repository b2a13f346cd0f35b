"""`qbench compare A B`: what changed from run A (baseline) to run B, per metric and per endpoint of a mix,
and whether B regressed past a threshold or broke its SLO (`check` raises SloViolation, exit code 3: a CI
gate). It reads summary.json and a few columns of records.parquet; a sweep stands for its best point."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.table import Table

if TYPE_CHECKING:
    import pandas as pd

from qbench.errors import QbenchError, ScenarioError, SloViolation
from qbench.report.chart_columns import fmt_s
from qbench.report.rundir import is_sweep_dir, read_json, read_run, winner_run_dir
from qbench.run import (
    Columns,
    PairedPhase,
    Pairing,
    RecordsFormatError,
    RequestRecord,
    RunInfo,
    SloCheck,
    Summary,
    SummaryFile,
    pair_runs,
    read_records,
)

Better = Literal["higher", "lower"]

#: Percentile columns compared for each phase; names follow the scenario's `slo:` keys (`p95_latency_s`).
STATS = ("p50", "p90", "p95", "p99", "max")
PHASES = ("latency_s", "queue_wait_s", "service_s", "ttfo_s", "send_lag_s", "ttft_s", "tpot_s", "itl_s")
RATES: dict[str, Better] = {
    "throughput_rps": "higher", "goodput_rps": "higher", "error_rate": "lower", "output_tps": "higher"
}
#: Metrics compared per endpoint of a mix (a shorter list than the total's).
ENDPOINT_METRICS = ("throughput_rps", "error_rate", "p50_latency_s", "p95_latency_s", "p99_latency_s",
                    "p95_queue_wait_s", "p50_service_s", "p95_service_s")


#: Columns each run keeps read (8 bytes a row each): two runs of 3.6 M requests hold 2 x 29 MiB at most.
COLUMNS_KEPT = 1


def metric_names() -> list[str]:
    return list(RATES) + [f"{stat}_{phase}" for phase in PHASES for stat in STATS]


def metric_value(summary: Summary, name: str) -> float | None:
    """A summary figure by compare/SLO name: throughput_rps, error_rate, p95_latency_s, max_service_s..."""
    if name == "output_tps" and not summary.output_tokens:
        return None  # not a token stream
    if name in RATES:
        value: float | None = getattr(summary, name)
        return value
    stat, _, phase = name.partition("_")
    stats = summary.phase(phase)
    return getattr(stats, stat) if stats.count else None


def direction(name: str) -> Better:
    return RATES.get(name, "lower")


@dataclass(frozen=True)
class Delta:
    """One metric in A and B."""

    name: str
    a: float | None
    b: float | None
    better: Better
    threshold: float | None = None  # max allowed relative regression (0.1 = 10 %), if given

    @property
    def change(self) -> float | None:
        """Relative change (B - A) / A; +-inf when A is 0 and B is not; None when either is missing."""
        if self.a is None or self.b is None:
            return None
        if self.a == 0:
            return 0.0 if self.b == 0 else math.copysign(math.inf, self.b)
        return (self.b - self.a) / abs(self.a)

    @property
    def worse_by(self) -> float | None:
        """How much worse B is, relatively (negative = better)."""
        change = self.change
        if change is None:
            return None
        return change if self.better == "lower" else -change

    @property
    def regressed(self) -> bool:
        if self.threshold is None:
            return False
        worse = self.worse_by
        if worse is None:  # the metric disappeared in B (e.g. no completed request): a regression
            return self.a is not None
        return worse > self.threshold


@dataclass
class ComparedRun:
    """One run of a comparison: its figures (summary.json) and its records as columns, read when asked."""

    path: Path
    info: RunInfo  # run.json (every field at its default when missing)
    summary: Summary
    columns: Columns
    notes: list[str] = field(default_factory=list)  # what was missing or odd

    @property
    def scenario(self) -> dict[str, Any]:
        return self.info.scenario

    @property
    def records(self) -> list[RequestRecord]:
        """Every record, read now (a notebook's convenience: one Python object per request)."""
        return read_records(self.path)


@dataclass
class Comparison:
    a: ComparedRun
    b: ComparedRun
    deltas: list[Delta]
    slo: list[SloCheck] = field(default_factory=list)  # B against its scenario's slo: section
    pairing: Pairing | None = None  # request-by-request figures when A and B share a schedule

    def notes(self) -> list[str]:
        """Reasons to read the table with care: different scenarios or a different offered load."""
        out = []
        names = (self.a.scenario.get("name"), self.b.scenario.get("name"))
        if names[0] != names[1]:
            out.append(f"A and B ran different scenarios ({names[0]} vs {names[1]})")
        offered = (self.a.summary.offered_rps, self.b.summary.offered_rps)
        if min(offered) > 0 and max(offered) / min(offered) > 1.1:
            out.append(f"the offered load differs ({offered[0]:.2f} vs {offered[1]:.2f} req/s): "
                       "latency changes may come from the load, not the server")
        return out

    def to_frame(self) -> pd.DataFrame:
        """The comparison as a DataFrame (one row per metric: a, b, change, threshold, regressed)."""
        import pandas as pd

        rows = [{"a": d.a, "b": d.b, "change": d.change, "better": d.better, "threshold": d.threshold,
                 "regressed": d.regressed} for d in self.deltas]
        return pd.DataFrame(rows, index=pd.Index([d.name for d in self.deltas], name="metric"))

    def regressions(self) -> list[Delta]:
        return [d for d in self.deltas if d.regressed]

    def failed_slo(self) -> list[SloCheck]:
        return [c for c in self.slo if not c.passed]

    @property
    def passed(self) -> bool:
        return not self.regressions() and not self.failed_slo()

    def check(self) -> None:
        """Raise SloViolation naming every regression and failed SLO threshold."""
        problems = [f"{d.name} {format_change(d.change)} (allowed {d.threshold:.1%})"
                    for d in self.regressions() if d.threshold is not None]
        for c in self.failed_slo():
            actual = "not measured" if c.actual is None else f"{c.actual:.4g}"
            problems.append(f"SLO {c.name} = {actual} (limit {c.threshold:g})")
        if problems:
            raise SloViolation(f"{self.b.path} against baseline {self.a.path}: " + "; ".join(problems))


def parse_max_regression(items: list[str]) -> dict[str, float]:
    """`["p95_latency_s=10%", "throughput_rps=0.05"]` -> {"p95_latency_s": 0.1, "throughput_rps": 0.05}."""
    names = metric_names()
    out: dict[str, float] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        label, colon, metric = name.rpartition(":")
        if not sep or (name not in names and not (colon and label and metric in ENDPOINT_METRICS)):
            raise ScenarioError(
                f"--max-regression {item!r}: expected METRIC=PERCENT with METRIC one of {', '.join(names)}; "
                f"or ENDPOINT:METRIC=PERCENT for an endpoint of a mix, METRIC one of "
                f"{', '.join(ENDPOINT_METRICS)}"
            )
        try:
            value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            raise ScenarioError(
                f"--max-regression {item!r}: '{raw}' is not a number (write 10% or 0.1)"
            ) from None
        if value < 0 or math.isnan(value):
            raise ScenarioError(f"--max-regression {item!r}: the allowed regression must be >= 0")
        out[name] = value
    return out


def resolve(path: Path) -> Path:
    """A run directory, or the recommended point's run directory of a sweep."""
    return winner_run_dir(path) if is_sweep_dir(path) else path


def compare(a_dir: Path, b_dir: Path, max_regression: dict[str, float] | None = None,
            *, use_slo: bool = True) -> Comparison:
    """Compare run B with baseline A; thresholds are relative regressions per metric."""
    limits = max_regression or {}
    a, b = read_compared(resolve(a_dir)), read_compared(resolve(b_dir))
    deltas = []
    for name in metric_names():
        va, vb = metric_value(a.summary, name), metric_value(b.summary, name)
        if va is None and vb is None:
            continue
        if name.startswith("p90") and name not in limits:  # keep the table short unless asked for
            continue
        deltas.append(Delta(name, va, vb, direction(name), limits.get(name)))
    deltas += endpoint_deltas(a.summary, b.summary, limits)
    pairing = pair_runs(a.columns, b.columns)
    return Comparison(a, b, deltas, slo=b.summary.checks() if use_slo else [], pairing=pairing)


def read_compared(path: Path) -> ComparedRun:
    """A run folder's summary.json and records' columns (summarised again if missing); QbenchError if none."""
    if not path.is_dir():
        raise QbenchError(f"{path}: not a directory (expected a run folder such as reports/<run-id>/)")
    notes: list[str] = []
    stored = SummaryFile.read(path, notes, then="the records were summarised again")
    summary = None if stored is None else stored.summary
    if summary is None or not _has_parquet(path):
        run = read_run(path)
        return ComparedRun(run.path, run.info, run.summary, Columns.of(run.records), run.notes + notes)
    try:
        columns = Columns.read(path, keep=COLUMNS_KEPT)
    except RecordsFormatError as exc:
        raise QbenchError(str(exc)) from None
    except (OSError, ValueError) as exc:  # a truncated or foreign Parquet file
        raise QbenchError(f"{path}: the records could not be read ({exc})") from None
    info = RunInfo.from_dict(read_json(path / "run.json", notes))
    return ComparedRun(path, info, summary, columns, notes)


def _has_parquet(path: Path) -> bool:
    return (path / "records.parquet").exists() or any(path.glob("records-*.parquet"))


def endpoint_deltas(a: Summary, b: Summary, limits: dict[str, float]) -> list[Delta]:
    """`LABEL:metric` deltas for every endpoint both runs have (runs of a mix)."""
    deltas = []
    for label in [k for k in a.endpoints if k in b.endpoints]:
        for name in ENDPOINT_METRICS:
            va, vb = metric_value(a.endpoints[label], name), metric_value(b.endpoints[label], name)
            if va is not None or vb is not None:
                key = f"{label}:{name}"
                deltas.append(Delta(key, va, vb, direction(name), limits.get(key)))
    return deltas


def format_change(change: float | None) -> str:
    if change is None:
        return "n/a"
    if math.isinf(change):
        return "+inf" if change > 0 else "-inf"
    return f"{change:+.1%}"


def comparison_table(c: Comparison) -> Table:
    """A rich table: metric, A, B, relative change (green = better, red = worse), threshold, verdict."""
    kind = "paired: same schedule" if c.pairing and c.pairing.shared else "unpaired"
    table = Table(title=f"{c.a.path.name} (A) -> {c.b.path.name} (B), {kind}", title_justify="left")
    for col in ("metric", "A", "B", "change", "allowed", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for d in c.deltas:
        worse = d.worse_by
        style = "" if worse is None or abs(worse) < 0.005 else ("red" if worse > 0 else "green")
        change = format_change(d.change)
        verdict = "[bold red]REGRESSED[/]" if d.regressed else ("ok" if d.threshold is not None else "")
        allowed = "-" if d.threshold is None else f"{d.threshold:.1%}"
        table.add_row(d.name, _cell(d.name, d.a), _cell(d.name, d.b),
                      f"[{style}]{change}[/]" if style else change, allowed, verdict)
    return table


def _cell(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    name = name.rpartition(":")[2]
    if name == "error_rate":
        return f"{value:.2%}"
    return f"{value:.2f}" if name.endswith("_rps") else fmt_s(value)


def paired_lines(pairing: Pairing) -> list[str]:
    """The request-by-request verdict per phase, one line each (rich markup)."""
    lines = [pairing.reason]
    if pairing.shared and (pairing.ok_in_a_only or pairing.ok_in_b_only):
        lines.append(f"  failed in B only: {pairing.ok_in_a_only}, failed in A only: {pairing.ok_in_b_only}")
    lines.extend(_paired_line(p) for p in pairing.phases)
    return lines


def _paired_line(p: PairedPhase) -> str:
    colour = {"faster": "green", "slower": "red"}.get(p.verdict, "")
    verdict = f"[{colour}]B {p.verdict}[/]" if colour else p.verdict
    p_text = "n/a" if p.p_value is None else f"{p.p_value:.2g}"
    interval = f"(95% CI {_signed_s(p.ci_low)} to {_signed_s(p.ci_high)})"
    if not p.paired:
        return (f"  {p.phase}: median(B) - median(A) {_signed_s(p.median_diff)} {interval}, "
                f"Mann-Whitney p = {p_text}: {verdict}")
    return (f"  {p.phase}: median B - A {_signed_s(p.median_diff)} {interval}, B faster for "
            f"{p.b_faster:.0%} of {p.pairs} requests, Wilcoxon p = {p_text}: {verdict}")


def _signed_s(value: float) -> str:
    return ("+" if value > 0 else "-" if value < 0 else "") + fmt_s(abs(value))


def write_paired_chart(c: Comparison, path: Path) -> Path:
    """The paired-differences chart (latency, B - A per request over time); QbenchError when unpaired."""
    from qbench.report.charts import paired_differences, save

    if c.pairing is None or not c.pairing.shared:
        raise QbenchError(f"--chart: {c.pairing.reason if c.pairing else 'the runs are not paired'}")
    return save(paired_differences(c.a.columns, c.b.columns), path)
