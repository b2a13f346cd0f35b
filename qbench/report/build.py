"""`qbench report DIR`: a run, sweep or capacity folder -> PNG charts, summary.md and a self-contained
report.html, rebuilt from the files on disk (figures from summary.json, charts from the records)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np

from qbench import __version__
from qbench.errors import QbenchError, ScenarioError
from qbench.report.chart_columns import fmt_s
from qbench.report.charts import Chart, render_run_charts
from qbench.report.phase_chart import render_phase_chart
from qbench.report.rundir import LoadedRun, is_sweep_dir, read_run
from qbench.report.sweep_charts import LoadedSweep, read_sweep, render_sweep_charts
from qbench.run import (
    PHASE_LABELS,
    SERVER_PHASE_LABELS,
    Columns,
    Finding,
    RunInfo,
    Scenario,
    SloCheck,
    Stats,
    Summary,
    alongside,
    bottleneck_warnings,
    chunk_line,
    diagnose_run,
    explain,
    host_cpus,
    journey_line,
    mix_starts,
    parse_scenario,
    time_split,
    token_line,
)
from qbench.tune import MeasuredPoint, Predicted, Recommendation, stored_rows

if TYPE_CHECKING:  # capacity and soak folders' modules (scipy's signal filters: 65 MiB) load when needed
    from qbench.report.capacity_charts import LoadedCapacity

MAX_JSON_CHARS = 20_000  # longer JSON blocks (a big Gradio /config) are cut in the HTML


@dataclass(frozen=True)
class ReportFiles:
    out_dir: Path
    markdown: Path
    html: Path
    charts: list[Chart]
    notes: list[str]


@dataclass
class ReportContext:
    """Everything the templates show; built once, rendered twice (markdown and HTML)."""

    kind: str  # "run", "sweep" or "capacity"
    title: str
    source: str
    headline: list[tuple[str, str]]
    charts: list[Chart]
    phases: list[list[str]] = field(default_factory=list)  # label, n, mean, p50, p90, p95, p99, max
    # a mix: endpoint, n, ok, errors, ok/s, wait p50/p95, service p50/p95, total p50/p95/p99, SLO
    endpoints: list[list[str]] = field(default_factory=list)
    # a journey: step, n, errors, wait p50/p95, service p50/p95, latency from the send p50/p95
    steps: list[list[str]] = field(default_factory=list)
    # where the time went: (endpoint, rows of phase, n, p50, p90); "" for a run of one endpoint
    time_split: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    functions: list[list[str]] = field(default_factory=list)  # /monitoring/summary: name, n, p50, p90, p99
    errors: list[list[str]] = field(default_factory=list)  # kind, count, share, example message
    slo: list[list[str]] = field(default_factory=list)  # name, limit, actual, verdict
    warnings: list[str] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)  # where the limit was (qbench.run.diagnose.limits)
    notes: list[str] = field(default_factory=list)
    details: list[tuple[str, str]] = field(default_factory=list)  # heading, preformatted text
    recommendation: Recommendation | None = None  # a sweep's
    search_mode: str = ""  # a sweep's search (grid, smart, model, sim)
    points: list[list[str]] = field(default_factory=list)  # ranked sweep points
    probes: list[list[str]] = field(default_factory=list)  # capacity probes: #, offered, ok/s, p50..why
    # model / sim search: point, role, predicted vs measured throughput, p95, capacity
    predicted: list[list[str]] = field(default_factory=list)
    over_time: list[str] = field(default_factory=list)  # a soak run's verdicts (qbench.run.soak.command)
    alongside: list[str] = field(default_factory=list)  # before/after a mix entry joined (run.alongside)
    app_notes: list[str] = field(default_factory=list)  # the app raised, events still running (app_errors)
    generated: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    version: str = __version__


def build_report(source: Path, out_dir: Path | None = None,
                 heatmap_axes: tuple[str, str] | None = None, recompute: bool = False) -> ReportFiles:
    """Build the charts, summary.md and report.html of a run or sweep folder. `recompute`: a run's summary,
    diagnosis and notes computed again from its records, not read from summary.json."""
    if not source.is_dir():
        raise QbenchError(f"{source}: not a directory (expected reports/<run-id>/ or reports/<sweep-id>/)")
    out = out_dir or source
    from qbench.report.capacity_charts import is_capacity_dir, read_capacity

    if is_capacity_dir(source):
        context = capacity_context(read_capacity(source), out / "charts")
    elif is_sweep_dir(source):
        context = sweep_context(read_sweep(source), out / "charts", heatmap_axes)
    else:
        context = run_context(read_run(source, recompute=recompute), out / "charts")
    return write_documents(context, out)


def write_documents(context: ReportContext, out: Path) -> ReportFiles:
    env = _environment()
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / "summary.md"
    markdown.write_text(env.get_template("summary.md.j2").render(c=context, out=out), encoding="utf-8")
    html = out / "report.html"
    images = {chart.name: _data_uri(chart.path) for chart in context.charts}
    html.write_text(env.get_template("report.html.j2").render(c=context, images=images), encoding="utf-8")
    return ReportFiles(out, markdown, html, context.charts, context.notes)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("qbench.report", "templates"),
        autoescape=lambda name: bool(name and name.endswith(".html.j2")),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["relpath"] = lambda p, base: Path(p).relative_to(base).as_posix()
    env.filters["human"] = lambda v: f"{v:.4g}" if isinstance(v, float) else v
    env.filters["mdrow"] = lambda cells: " | ".join(
        str(c).replace("|", "\\|").replace("\n", " ") for c in cells)
    return env


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


# ---------------------------------------------------------------- a run


def run_context(run: LoadedRun, charts_dir: Path) -> ReportContext:
    s = run.summary
    scenario_name = run.scenario.get("name") or run.path.name
    return ReportContext(
        kind="run",
        title=f"qbench run: {scenario_name}",
        source=str(run.path),
        headline=run_headline(run),
        charts=render_run_charts(run.columns, charts_dir) + render_phase_chart(run.columns, charts_dir)
        + soak_charts(run.path, charts_dir),
        phases=phase_rows(s),
        endpoints=endpoint_rows(s),
        steps=step_rows(s),
        time_split=[(label, time_split_rows(part)) for label, part in time_split(s)],
        functions=function_rows(s),
        errors=error_rows(run),
        slo=[slo_row(c) for c in s.checks()],
        warnings=bottleneck_warnings(s),
        diagnosis=[f"{f.kind}: {f.message}" for f in diagnosis(run)],
        notes=run.notes,
        details=run_details(run.info),
        over_time=soak_lines(run.path),
        alongside=alongside_lines(run, scenario := _scenario(run)),
        app_notes=run.stored.app_notes if run.stored.app_notes is not None
        else explain(run.records, scenario, run.info.server or None),
    )


def diagnosis(run: LoadedRun) -> list[Finding]:
    """Where the limit was: summary.json's, else diagnosed from the records (qbench.run.diagnose)."""
    if run.stored.diagnosis is not None:
        return run.stored.diagnosis
    return diagnose_run(run.records, run.summary, run.info.server or None,
                        cpus=host_cpus(run.info.host, run.info.target))


def soak_charts(run_dir: Path, charts_dir: Path) -> list[Chart]:
    """A soak run's over-time charts ([] without soak.json: then the soak modules are not imported)."""
    if not (run_dir / "soak.json").exists():
        return []
    from qbench.report.soak_charts import render_soak_charts

    return render_soak_charts(run_dir, charts_dir)


def soak_lines(run_dir: Path) -> list[str]:
    """A soak run's verdicts over time ([] without soak.json)."""
    if not (run_dir / "soak.json").exists():
        return []
    from qbench.run import read_report

    soak = read_report(run_dir)
    return soak.lines() if soak is not None else []


def _scenario(run: LoadedRun) -> Scenario | None:
    """The run's scenario as run.json saved it (None: missing, or no longer valid)."""
    try:
        return parse_scenario(dict(run.scenario)) if run.scenario else None
    except (ScenarioError, ValueError, TypeError):
        return None


def alongside_lines(run: LoadedRun, scenario: Scenario | None) -> list[str]:
    """The endpoints before and after a mix entry joined, from the records (qbench.run.results.alongside)."""
    if run.stored.alongside is not None:
        return [a.line() for a in run.stored.alongside]
    starts = mix_starts(scenario) if scenario is not None else None
    if scenario is None or not starts:
        return []
    return [a.line() for a in alongside(run.records, starts, scenario.load.duration)]


def slo_row(c: SloCheck) -> list[str]:
    """name, limit, actual (or why there is none), verdict."""
    actual = (c.note or "-") if c.actual is None else f"{c.actual:.4g}"
    limit = f"{'>=' if c.kind == 'min' else '<='} {c.threshold:g}"
    return [c.name, limit, actual, "pass" if c.passed else "FAIL"]


def run_headline(run: LoadedRun) -> list[tuple[str, str]]:
    s = run.summary
    total = s.phase("latency_s")
    warmup = int(run.columns.bools("warmup").sum())
    rows = [
        ("target", run.info.target or "unknown"),
        ("started", run.info.started_at or "unknown"),
        ("requests", f"{s.requests} measured ({s.sent} sent, {s.not_sent} not sent); "
                     f"{warmup} warm-up excluded"),
        ("ok / errors", f"{s.completed_ok} / {s.errors} (error rate {s.error_rate:.2%})"),
        ("offered load", f"{s.offered_rps:.2f} req/s"),
        ("throughput", f"{s.throughput_rps:.2f} req/s over {s.duration_s:.2f} s"),
        ("goodput", f"{s.goodput_rps:.2f} req/s " + ("(ok and within the SLO)" if s.slo else "(no SLO set)")),
        ("latency p50 / p95 / p99", " / ".join(_s(getattr(total, p)) for p in ("p50", "p95", "p99"))),
        ("queue wait p95", _s(s.phase("queue_wait_s").p95)),
        ("send lag p99", _s(s.phase("send_lag_s").p99)),
    ]
    if s.output_tokens:
        rows.append(("tokens", token_line(s)))
    if s.chunks_sent:
        rows.append(("input chunks", chunk_line(s)))
    if s.journeys is not None:
        rows.append(("journeys", journey_line(s.journeys).removeprefix("journeys: ")))
    if s.server_traces is not None and (s.server_traces.source != "none" or s.server_traces.note):
        rows.append(("server phases", s.server_traces.line().removeprefix("server phases: ")))
    if s.device is not None and s.device.line():
        rows.append(("device", s.device.line().removeprefix("device: ")))
    if s.checks():
        failed = ", ".join(c.name for c in s.failed_checks())
        rows.append(("SLO", "passed" if s.slo_passed else f"FAILED: {failed}"))
    if run.info.stop_reason:
        rows.append(("stopped", f"{run.info.stop_kind or ''}: {run.info.stop_reason}"))
    auth = run.info.auth
    if run.info.logged_in:
        rows.append(("login", f"{auth.get('accounts')} account(s): {auth.get('logins')} login(s), "
                              f"{auth.get('relogins')} re-login(s) after a 401"))
    return rows


def phase_rows(s: Summary) -> list[list[str]]:
    rows = [_stats_row(label, s.phase(name)) for name, label in PHASE_LABELS.items() if s.phase(name).count]
    if s.eta_error.count:
        rows.append(_stats_row("server ETA error (estimate - actual)", s.eta_error))
    return rows


def time_split_rows(s: Summary) -> list[list[str]]:
    """Where the time went: phase, n, p50, p90 (a phase no request had is absent; zero ones left out)."""
    rows = []
    for name, stats in s.server_phases.items():
        if not stats.max:
            continue
        size = name == "server_batch_size"
        cells = [f"{v:.3g}" if size and v is not None else _s(v) for v in (stats.p50, stats.p90)]
        rows.append([SERVER_PHASE_LABELS.get(name, name), str(stats.count), *cells])
    return rows


def function_rows(s: Summary) -> list[list[str]]:
    """Gradio's /monitoring/summary per function ([] when the run had per-request phases or none)."""
    functions = s.server_traces.functions if s.server_traces is not None else {}
    return [[name, "-" if f.requests is None else str(f.requests), _s(f.p50_s), _s(f.p90_s), _s(f.p99_s)]
            for name, f in functions.items()]


def step_rows(s: Summary) -> list[list[str]]:
    """One row per journey step ([] for a run without journeys)."""
    if s.journeys is None:
        return []
    rows = []
    for key, e in s.journeys.steps.items():
        wait, service, lat = e.phase("queue_wait_s"), e.phase("service_s"), e.phase("latency_from_send_s")
        rows.append([key, str(e.requests), str(e.errors), _s(wait.p50), _s(wait.p95), _s(service.p50),
                     _s(service.p95), _s(lat.p50), _s(lat.p95)])
    return rows


def endpoint_rows(s: Summary) -> list[list[str]]:
    """One row per endpoint of a mix, then the total ([] for a run of one endpoint)."""
    if not s.endpoints:
        return []
    rows = []
    for label, e in [*s.endpoints.items(), ("all", s)]:
        wait, service, total = e.phase("queue_wait_s"), e.phase("service_s"), e.phase("latency_s")
        verdict = "" if not e.slo else "pass" if all(c.passed for c in e.slo) else "FAIL"
        if label == "all":
            verdict = "" if not s.checks() else "pass" if s.slo_passed else "FAIL"
        rows.append([label, str(e.requests), str(e.completed_ok), str(e.errors), f"{e.throughput_rps:.2f}",
                     _s(wait.p50), _s(wait.p95), _s(service.p50), _s(service.p95), _s(total.p50),
                     _s(total.p95), _s(total.p99), verdict])
    return rows


def _stats_row(label: str, stats: Stats) -> list[str]:
    keys = ("mean", "p50", "p90", "p95", "p99", "max")
    return [label, str(stats.count)] + [_s(getattr(stats, k)) for k in keys]


def error_rows(run: LoadedRun) -> list[list[str]]:
    s = run.summary
    examples = error_examples(run.columns)
    return [[kind, str(n), f"{n / s.requests:.1%}" if s.requests else "-", examples.get(kind, "")]
            for kind, n in sorted(s.errors_by_kind.items(), key=lambda kv: -kv[1])]


def error_examples(cols: Columns) -> dict[str, str]:
    """Per error kind ("client" for none), its first measured failure's message (cut to 160 chars)."""
    failed = ~cols.ok() & cols.measured()
    if not failed.any():
        return {}
    codes, kinds = cols.labels("error_kind")
    names = [k or "client" for k in kinds] + ["client"]
    codes = np.where(codes < 0, len(kinds), codes)[failed]
    rows = np.flatnonzero(failed)
    examples: dict[str, str] = {}
    seen, first = np.unique(codes, return_index=True)
    messages = cols.strings("error_message")
    for code, at in sorted(zip(seen.tolist(), first.tolist(), strict=True), key=lambda pair: pair[1]):
        examples.setdefault(names[code], (messages[rows[at]] or "")[:160])
    return examples


def run_details(info: RunInfo) -> list[tuple[str, str]]:
    """Scenario, target, server config and environment, as readable JSON blocks."""
    server = info.server
    blocks = [
        ("Scenario", info.scenario),
        ("Target", {"target": info.target, "endpoint": server.get("endpoint_info"),
                    "fn_index": server.get("fn_index"), "auth": info.auth}),
        ("Server status (/status)", server.get("status")),
        ("Server config (/config)", server.get("config")),
        ("Environment", {"qbench_version": info.qbench_version, "started_at": info.started_at,
                         "host": info.host}),
        ("Load generator", info.load_generator()),
    ]
    return [(title, _json(value)) for title, value in blocks if _present(value)]


def _present(value: Any) -> bool:
    """Worth showing: not None/empty, and a dict with at least one present value."""
    if isinstance(value, dict):
        return any(_present(v) for v in value.values())
    return bool(value)


def _json(value: Any) -> str:
    text = json.dumps(value, indent=2, default=str)
    return text if len(text) <= MAX_JSON_CHARS else text[:MAX_JSON_CHARS] + "\n... (cut; see run.json)"


def _s(value: float | None) -> str:
    return "-" if value is None else fmt_s(value)


# ---------------------------------------------------------------- a sweep


def sweep_context(data: LoadedSweep, charts_dir: Path, axes: tuple[str, str] | None) -> ReportContext:
    for knob in axes or ():
        if knob not in data.knobs:
            choices = ", ".join(data.knobs) or "none"
            raise QbenchError(f"{data.path}: '{knob}' is not a swept knob; choose from {choices}")
    rec = data.recommendation
    name = data.info.scenario_name
    return ReportContext(
        kind="sweep",
        title=f"qbench sweep: {name or data.path.name}",
        source=str(data.path),
        headline=sweep_headline(data),
        charts=render_sweep_charts(data, charts_dir, axes),
        notes=data.notes,
        recommendation=rec,
        search_mode=str(data.search.get("mode", "")),
        points=point_rows(data),
        predicted=predicted_rows(data.search),
        details=[(t, _json(v)) for t, v in (("Sweep", _without(data.info.to_dict(), "scenario")),
                                            ("Scenario", data.info.scenario)) if _present(v)],
    )


def point_rows(data: LoadedSweep) -> list[list[str]]:
    """The sweep's points, best rank first: rank, verdict, knobs, goodput, p95, error rate, reason."""
    ranked = data.recommendation.ranked if data.recommendation is not None else []
    reasons = {p.point_id: p for p in ranked}
    ordered = sorted(data.rows, key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    rows = []
    for r in ordered:
        why = reasons.get(str(r.get("point_id")))
        verdict = r.get("verdict") or (why.verdict if why else "") or r.get("status") or ""
        rows.append([str(r.get("rank") or ""), str(verdict), data.label(r), _num(r.get("goodput_rps")),
                     _s(r.get("p95_latency_s")), f"{r.get('error_rate') or 0:.1%}",
                     str((why.reason if why else "") or r.get("reason") or "")])
    return rows


def predicted_rows(search: dict[str, Any]) -> list[list[str]]:
    """Model and sim search: each measured point's predicted vs measured figures (keys depend on the mode)."""
    out = []
    for row in stored_rows(search.get("predicted_vs_measured")):
        pred, meas = row.predicted or Predicted(), row.measured
        measured = meas != MeasuredPoint()  # a row without its measured block (an older file) shows "-"
        out.append([row.point_id, row.role,
                    _num(pred.throughput_rps), _num(meas.throughput_rps) if measured else "-",
                    _s(pred.p95_latency_s), _s(meas.p95_latency_s),
                    _num(pred.capacity_rps), _num(meas.capacity_rps)])
    return out


def sweep_headline(data: LoadedSweep) -> list[tuple[str, str]]:
    rec = data.recommendation
    objective = data.info.objective or (rec.objective if rec is not None else None)
    statuses = [str(r.get("status")) for r in data.rows]
    unapplied = statuses.count("knobs_not_applied")
    stopped = f"{statuses.count('stopped')} stopped" + (f", {unapplied} with knobs not applied" if unapplied
                                                         else "")
    rows = [
        ("mode / search", f"{data.info.mode or '?'} / {data.info.search or '?'}"),
        ("points", f"{len(data.rows)} measured ({statuses.count('ok')} ok, "
                   f"{statuses.count('failed')} failed, {stopped})"),
        ("swept knobs", ", ".join(f"{k} ({len(v)} values)" for k, v in data.knobs.items()) or "none"),
        ("SLO", ", ".join(f"{k} {v}" for k, v in data.info.slo.items()) or "none"),
        ("objective", f"{objective or 'latency'}: " + str(
            (rec.objective_why if rec is not None else "") or "points ranked by goodput at the load")),
    ]
    winner = rec.winner if rec is not None else None
    if winner is not None:
        knobs = ", ".join(f"{k}={v}" for k, v in winner.knobs.items())
        capacity = (f"capacity {_num(winner.capacity_rps)} req/s meeting the SLO; at the scenario's "
                    "load: " if objective == "capacity" else "")
        rows.append(("recommended", f"{knobs}: {capacity}goodput {_num(winner.goodput_rps)} req/s, "
                                    f"p95 {_s(winner.p95_latency_s)}"))
    else:
        rows.append(("recommended", "no point met the constraints"))
    record = rec.capacity if rec is not None else None
    if record is not None and record.held:  # how the capacity held a sustained run (files before it: none)
        rows.append(("capacity", record.held))
    over = record.capacity.over_the_search if record is not None else None
    if over is not None:  # the first passing rate measured again after the search
        rows.append(("over the search", over))
    return rows


def _without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def _num(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


# ---------------------------------------------------------------- a capacity search


def capacity_context(data: LoadedCapacity, charts_dir: Path) -> ReportContext:
    file = data.file
    return ReportContext(
        kind="capacity",
        title=f"qbench capacity: {file.scenario_name or data.path.name}",
        source=str(data.path),
        headline=capacity_headline(data),
        charts=_capacity_charts(data, charts_dir),
        notes=data.notes,
        probes=probe_rows(data),
        details=[(t, _json(v)) for t, v in (
            ("Search", _without(file.to_dict(), "scenario", "result", "answer")), ("Scenario", file.scenario))
            if v],
    )


def _capacity_charts(data: LoadedCapacity, charts_dir: Path) -> list[Chart]:
    from qbench.report.capacity_charts import render_capacity_charts

    return render_capacity_charts(data, charts_dir)


def capacity_headline(data: LoadedCapacity) -> list[tuple[str, str]]:
    file, result = data.file, data.file.result
    slo = ", ".join(f"{k} <= {v}" for k, v in file.slo.items()) or "none"
    rows = [("target", file.target or "unknown"),
            ("SLO", f"{slo}; error_rate <= {_pct(file.max_error_rate)}")]
    rows += file.answer
    rows.append(("probes", f"{len(file.rate_probes)} open-loop of {_num(file.probe_duration_s)} s, "
                           f"tolerance {_pct(result.tolerance)}, "
                           f"{'converged' if result.converged else 'not converged'}"))
    for label, text in data.plan:  # `qbench plan` on this folder (its settings' code on one line)
        rows.append((f"plan: {label}", text.replace(":\n", ": ").replace("\n", "; ")))
    return rows


def probe_rows(data: LoadedCapacity) -> list[list[str]]:
    """Every probe in the order it ran: #, offered, ok/s, p50, p95, p99, errors, verdict, why."""
    rows = []
    for n, p in enumerate(data.file.probes):
        offered = f"{p.users} users" if p.kind == "estimate" else _num(p.rate_rps)
        if p.kind in ("confirm", "overload", "after", "now") and p.duration_s:
            offered = f"{p.kind} {p.duration_s:g} s: {offered}"
        rows.append([str(n), offered, _num(p.throughput_rps), _s(p.p50_latency_s), _s(p.p95_latency_s),
                     _s(p.p99_latency_s), _pct(p.error_rate), p.verdict, p.why])
    return rows


def _pct(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) else "-"
