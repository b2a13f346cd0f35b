"""What `qbench sweep` shows: progress over points, the ranked table, the winner's code, the max_size
advice and the capacity (its probes as qbench.tune.capacity.console shows them)."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table

from qbench.tune.capacity.console import seconds
from qbench.tune.knobs.grid import Point
from qbench.tune.search.by_model import ModelSearchResult
from qbench.tune.search.by_simulation import SimSearchResult
from qbench.tune.search.fit import Predicted
from qbench.tune.search.smart import SearchResult
from qbench.tune.sweep.command import SweepResult
from qbench.tune.sweep.config import SweepConfig
from qbench.tune.sweep.confirm import confirmation_line
from qbench.tune.values.ceiling import CapacityRecord
from qbench.tune.values.result import PointResult

_VERDICT_STYLE = {
    "winner": "bold green",
    "tied": "green",
    "feasible": "",
    "infeasible": "yellow",
    "failed": "red",
    "knobs_not_applied": "bold red",
}


class SweepProgress:
    """A rich progress bar over points; the description shows the current point and the best so far."""

    def __init__(self, total: int, console: Console | None = None, *, smart: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
        )
        self.task = self.progress.add_task("sweep", total=None if smart else total)
        self.best = "-"

    def __enter__(self) -> SweepProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def point_started(self, point: Point, index: int, total: int) -> None:
        self.progress.update(self.task, description=f"point {point.point_id} | best {self.best}")

    def point_done(self, result: PointResult, best: PointResult | None) -> None:
        if best is not None:
            self.best = f"{best.point_id} {best.goodput_rps:.3g} rps"
            if best.capacity is not None:
                self.best = f"{best.point_id} capacity {_capacity_cell(best)} req/s"
        note = "" if result.status == "ok" else f" [{result.status}]"
        capacity = f", capacity {_capacity_cell(result)} req/s" if result.capacity is not None else ""
        self.progress.console.print(  # plain text: "[stopped]" is not rich markup
            f"  {result.point_id}: goodput {result.goodput_rps:.3g} rps, p95 {seconds(result.p95_latency_s)}"
            f"{capacity}{note}" + (f" {result.reason}" if result.reason else ""),
            markup=False,
        )
        self.progress.update(self.task, advance=1, description=f"best {self.best}")

    def phase(self, text: str) -> None:
        self.progress.update(self.task, description=text)


def ranked_table(result: SweepResult) -> Table:
    rec = result.recommendation
    by_id = {r.point_id: r for r in result.results}
    knob_names = list(dict.fromkeys(k for r in result.results for k in r.knobs))
    table = Table(title=f"qbench sweep: {len(result.results)} points", title_justify="left")
    table.add_column("#", justify="right")
    for name in knob_names:
        table.add_column(name, justify="right")
    by_capacity = rec.objective == "capacity"
    for col in ("capacity/s",) * by_capacity + ("goodput/s", "p50", "p95", "err", "rss MB"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("why", min_width=40, overflow="fold")
    for ranked in rec.ranked:
        p = by_id[ranked.point_id]
        lo, hi = p.goodput_ci()
        goodput = f"{p.goodput_rps:.3g}" + (f" [{lo:.3g}-{hi:.3g}]" if p.goodput_repeats else "")
        table.add_row(
            str(ranked.rank),
            *(str(p.knobs.get(n, "")) for n in knob_names),
            *([_capacity_cell(p)] if by_capacity else []),
            goodput,
            seconds(p.p50_latency_s),
            seconds(p.p95_latency_s),
            f"{p.error_rate:.1%}",
            "-" if p.peak_rss_mb is None else f"{p.peak_rss_mb:.0f}",
            ranked.reason,
            style=_VERDICT_STYLE.get(ranked.verdict, ""),
        )
    return table


def _capacity_cell(p: PointResult) -> str:
    failing = p.capacity.failing_rate_rps if p.capacity is not None else None
    if p.capacity_rps is None:
        return "-" if failing is None else f"< {failing:.3g}"
    return f"{p.capacity_rps:.3g}" + (f" [<{failing:.3g}]" if failing else "")


def sweep_console() -> Console:
    """Stdout console; wide enough for the ranked table when output is not a terminal (files, CI logs)."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def sweep_header(config: SweepConfig) -> str:
    """The line a sweep starts with: its folder, mode, search, size and objective."""
    return (f"sweep {config.sweep_dir} ({config.mode}, {config.search}, {config.grid.size} points, "
            f"objective {config.constraints.objective})")


def render_sweep(result: SweepResult, console: Console) -> None:
    rec = result.recommendation
    console.print(ranked_table(result))
    search = result.search
    if isinstance(search, ModelSearchResult):
        render_model_search(search, console)
    if search.grid_size != search.trials:
        label = _search_label(search)
        console.print(
            f"{label}: {search.trials} of {search.grid_size} grid points measured "
            f"({search.saved} trials saved, {search.saved / search.grid_size:.0%})"
        )
    not_applied = [r for r in rec.ranked if r.verdict == "knobs_not_applied"]
    if not_applied:
        ids = ", ".join(r.point_id for r in not_applied)
        console.print(f"[bold red]knobs not applied[/] at {ids}: these points measured the app's own "
                      f"settings, not the point's, and are not ranked. {_let_qbench_set(rec.framework)}; "
                      "point.json has the evidence")
    if rec.winner is None:
        console.print(f"[bold red]no recommendation:[/] {rec.why}")
        return
    console.print(f"objective: {rec.objective} ({rec.objective_why})")
    console.print(f"[bold green]winner:[/] {rec.why}")
    for text in rec.notes:
        console.print(f"[yellow]note:[/] {text}")
    for line in rec.app_change:
        console.print(f"[bold]{line}[/]")
    if rec.server_code:
        label = rec.server_code_label
        language = ("yaml" if label.startswith("reference server")
                    else "python" if label.startswith("LitServe") else "bash")
        code = Syntax(rec.server_code.rstrip(), language, theme="ansi_dark", word_wrap=True)
        console.print(Panel(code, title=rec.server_code_label))
    elif rec.gradio_code:
        release = f"Gradio {rec.gradio_major}.x" if rec.gradio_major else "Gradio 4.x and later"
        if "@server.api(" in rec.gradio_code:
            release += ": your gradio.Server app's settings"
        code = Syntax(rec.gradio_code, "python", theme="ansi_dark", word_wrap=True)
        console.print(Panel(code, title=release))
    console.print(f"max_size: {rec.max_size_advice.why if rec.max_size_advice else ''}")
    console.print(_capacity_line(rec.capacity))
    held = confirmation_line(rec.capacity)
    if held and rec.capacity is not None:
        console.print(f"[{'green' if rec.capacity.capacity.confirmed else 'yellow'}]{held}[/]")
    over = rec.capacity.capacity.over_the_search if rec.capacity else None
    if over is not None and rec.capacity is not None:
        degradation = rec.capacity.capacity.degradation
        line = f"over the search: {over}"
        console.print(f"[yellow]{line}[/]" if degradation is not None and degradation.degraded else line)
    if rec.capacity and rec.capacity.capacity.restarts:
        console.print(f"[yellow]{_restarted(rec.capacity.capacity.restarts)}[/]")
    console.print(f"files: {result.sweep_dir}")


#: how each framework's knobs reach the app, for points whose knobs did not (None: a Gradio app)
LET_QBENCH_SET = {
    "litserve": "Let qbench set them (--app app.py: its startup hook sets LitAPI's and LitServer's "
                "arguments), or pass each {knob} of --launch to what the app reads",
    "bentoml": "Let qbench set them (--app service.py: its startup hook sets @bentoml.api's and "
               "@bentoml.service's arguments), or pass each {knob} of --launch to what the service reads",
    "torchserve": "A model archive's model-config.yaml wins over config.properties in TorchServe: set them "
                  "there (or drop them from it); with --app config.properties qbench sets models=, "
                  "job_queue_size and default_workers_per_model",
}


def _let_qbench_set(framework: str | None) -> str:
    return LET_QBENCH_SET.get(framework or "", "Let qbench start the app (--app app.py, or --launch 'python "
                              "app.py': its startup hook sets the knobs when the app calls Blocks.launch()), "
                              "or make the app read QBENCH_<KNOB> (e.g. QBENCH_CONCURRENCY_LIMIT)")


def _restarted(restarts: list[str]) -> str:
    return ("restarted: a run left the app collapsed (a metastable server), so qbench restarted it and ran "
            f"the next step on a fresh start: {'; '.join(restarts)}")


def _capacity_line(record: CapacityRecord | None) -> str:
    if record is None:
        return "capacity: not measured"
    capacity = record.capacity
    rate, failing = capacity.capacity_rps, capacity.failing_rate_rps
    trials = sum(p.kind == "rate" for p in capacity.probes)
    if rate is None:
        return f"capacity: the SLO failed even at {failing:.3g} req/s ({trials} probes)"
    above = f", fails at {failing:.3g} req/s" if failing else " (never failed within the probes)"
    tol = f"tolerance {capacity.tolerance:.0%}"
    tol += "" if capacity.converged else ", not converged"
    return (
        f"capacity: meets the SLO up to {rate:.3g} req/s (open-loop arrivals){above}; {trials} probes, {tol}"
    )


def _search_label(search: SearchResult) -> str:
    if isinstance(search, SimSearchResult):
        return "simulator search"
    return "model search" if isinstance(search, ModelSearchResult) else "smart search"


def render_model_search(search: ModelSearchResult, console: Console) -> None:
    """The fitted l(b) and predicted vs measured figures of the measured points (model and sim search)."""
    label = _search_label(search)
    if search.fallback:
        console.print(f"[yellow]note:[/] {label} {search.fallback}")
    fit, sigma = search.model.fit, search.model.sigma
    if fit is not None:
        console.print(
            f"batch latency fit: l(b) = {fit.t0_s * 1e3:.3g} ms + {fit.alpha_s * 1e3:.3g} ms x b "
            f"(per extra worker: +{fit.t0_per_worker_s * 1e3:.3g} ms, "
            f"+{fit.alpha_per_worker_s * 1e3:.3g} ms x b), R^2 {fit.r2:.3f}"
            + (f", spread sigma {sigma:.2f} (lognormal)" if sigma is not None else "")
        )
    capacity = any(row.measured.capacity_rps is not None
                   or (row.predicted is not None and row.predicted.capacity_rps is not None)
                   for row in search.predicted_vs_measured)
    table = Table(title=f"{label}: predicted vs measured", title_justify="left")
    columns = ["point", "role", "pred. X/s", "meas. X/s", "pred. p95", "meas. p95", "meas. goodput/s"]
    columns += ["pred. cap/s", "meas. cap/s"] if capacity else []
    for col in columns:
        table.add_column(col, justify="right" if col not in ("point", "role") else "left")
    for row in search.predicted_vs_measured:
        pred, meas = row.predicted or Predicted(), row.measured
        cells = [
            row.point_id,
            row.role,
            _num(pred.throughput_rps),
            _num(meas.throughput_rps),
            seconds(pred.p95_latency_s),
            seconds(meas.p95_latency_s),
            _num(meas.goodput_rps),
        ]
        cells += [_num(pred.capacity_rps), _num(meas.capacity_rps)] if capacity else []
        table.add_row(*cells)
    console.print(table)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
