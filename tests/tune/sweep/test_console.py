"""qbench.tune.sweep.console: what `qbench sweep`, `qbench capacity` and `qbench plan` print for given
results (rendered into a recording rich Console and read back as plain text)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from qbench.run.results.steady import Steadiness
from qbench.tune.capacity.command import CapacityRun, capacity_config
from qbench.tune.capacity.console import (
    capacity_header,
    probe_line,
    probe_table,
    render_capacity,
    show_probe,
)
from qbench.tune.plan.command import PlanRun
from qbench.tune.plan.console import render_plan
from qbench.tune.plan.replicas import Replica, make_plan, traffic
from qbench.tune.ranking.recommend import RankedPoint, Recommendation
from qbench.tune.search.smart import SearchResult
from qbench.tune.sweep.command import SweepResult
from qbench.tune.sweep.config import SweepOptions, build_config
from qbench.tune.sweep.console import (
    SweepProgress,
    _capacity_line,
    ranked_table,
    render_sweep,
    sweep_header,
)
from qbench.tune.values.ceiling import Capacity, CapacityRecord, Probe
from qbench.tune.values.result import MaxSizeAdvice, PointResult

from ..conftest import write_scenario


def console() -> Console:
    return Console(record=True, width=200, color_system=None)


BOX = {code: " " for code in range(0x2500, 0x2580)}  # the tables' box-drawing characters


def text(c: Console) -> str:
    """What was printed, as plain text (the buffer is read once: export_text clears it)."""
    return c.export_text()


def words(c: Console) -> str:
    """What was printed, box-drawing characters dropped and white space collapsed (tables read as rows)."""
    return " ".join(text(c).translate(BOX).split())


STEADY = Steadiness(True, 10.0, 100, 100, 10.0, 10.0, 0.05)


@pytest.mark.parametrize(
    ("probe", "line"),
    [
        (Probe(12.5, False, kind="estimate", users=32, p95_latency_s=2.0),
         "  estimate: 32 closed-loop users -> 12.5 completions/s (users / mean latency), p95 2 s"),
        (Probe(10.0, True, throughput_rps=9.9, p95_latency_s=0.25, duration_s=5.0, steadiness=STEADY),
         "  10 req/s 5 s: pass, p95 0.25 s, 9.9 ok/s [arrivals 10/s, completions 10/s]"),
        (Probe(20.0, False, violations=["p95_latency_s 1.2 > 0.5"], p95_latency_s=1.2, steadiness=STEADY),
         "  20 req/s: fail, p95 1.2 s, 0 ok/s (p95_latency_s 1.2 > 0.5)"),  # evidence only when it passed
        (Probe(20.0, False, stopped="not steady, backlog +5/s"),
         "  20 req/s: runaway, p95 -, 0 ok/s (not steady, backlog +5/s)"),
        (Probe(10.0, True, kind="confirm", duration_s=60.0, p95_latency_s=0.3),
         "  confirm 60 s 10 req/s: pass, p95 0.3 s, 0 ok/s"),
        (Probe(13.0, False, kind="overload", steadiness=STEADY),
         "  overload 13 req/s: overload, p95 -, 0 ok/s [arrivals 10/s, completions 10/s]"),
        (Probe(10.0, True, kind="recheck"), "  recheck 10 req/s: recheck, p95 -, 0 ok/s"),
    ],
)
def test_probe_line(probe: Probe, line: str) -> None:
    assert probe_line(probe) == line


def test_probe_table_lists_every_probe_in_order() -> None:
    capacity = Capacity(10.0, 20.0, 0.1, False, probes=[
        Probe(12.5, False, kind="estimate", users=32),
        Probe(10.0, True, throughput_rps=9.9, p50_latency_s=0.1, p95_latency_s=0.25, p99_latency_s=0.4),
        Probe(20.0, False, violations=["p95_latency_s 1.2 > 0.5"], error_rate=0.125),
        Probe(10.0, True, kind="confirm", duration_s=60.0),
    ])
    c = console()
    c.print(probe_table(capacity))
    out = words(c)
    assert out.startswith("qbench capacity: 4 probes # offered/s ok/s p50 p95 p99 err verdict why")
    assert ("0 32 users 0 - - - 0.0% estimate 1 10 9.9 0.1 s 0.25 s 0.4 s 0.0% pass 2 20 0 - - - 12.5% fail "
            "p95_latency_s 1.2 > 0.5 3 confirm 60 s 10 0 - - - 0.0% pass") in out


@pytest.mark.parametrize(
    ("record", "line"),
    [
        (None, "capacity: not measured"),
        (CapacityRecord(Capacity(None, 2.0, 0.1, True, probes=[Probe(2.0, False)])),
         "capacity: the SLO failed even at 2 req/s (1 probes)"),
        (CapacityRecord(Capacity(40.0, 44.0, 0.1, True, probes=[Probe(40.0, True), Probe(44.0, False),
                                                               Probe(40.0, True, kind="confirm")])),
         "capacity: meets the SLO up to 40 req/s (open-loop arrivals), fails at 44 req/s; 2 probes, "
         "tolerance 10%"),
        (CapacityRecord(Capacity(80.0, None, 0.05, False, probes=[Probe(80.0, True)])),
         "capacity: meets the SLO up to 80 req/s (open-loop arrivals) (never failed within the probes); "
         "1 probes, tolerance 5%, not converged"),
    ],
)
def test_capacity_line(record: CapacityRecord | None, line: str) -> None:
    assert _capacity_line(record) == line


def result(point_id: str, c: int, goodput: float, **fields: object) -> PointResult:
    return PointResult(point_id, {"concurrency_limit": c}, goodput_rps=goodput, p50_latency_s=0.1,
                       p95_latency_s=0.2, **fields)  # type: ignore[arg-type]


def ranked(rank: int, r: PointResult, verdict: str, reason: str) -> RankedPoint:
    return RankedPoint(rank, r.point_id, r.knobs, verdict, reason,  # type: ignore[arg-type]
                       r.capacity_rps, **r.figure_values())


def sweep_result(tmp_path: Path, *, winner: bool = True, objective: str = "latency") -> SweepResult:
    a = result("c1", 1, 10.0, peak_rss_mb=512.4, capacity_rps=12.0)
    b = result("c2", 2, 18.0, goodput_repeats=[17.0, 19.0], error_rate=0.02, capacity_rps=None)
    rec = Recommendation(
        winner=b if winner else None,
        ranked=[ranked(1, b, "winner", "highest goodput"), ranked(2, a, "infeasible", "p95 too high")],
        why="c2: highest goodput 18 rps" if winner else "no point met the SLO",
        gradio_code="demo.queue(default_concurrency_limit=2)",
        max_size_advice=MaxSizeAdvice("keep the queue unbounded"),
        notes=["c2 sits on the grid's edge"],
        objective=objective,  # type: ignore[arg-type]
        objective_why="the default",
    )
    return SweepResult(tmp_path / "sweep-1", [a, b], rec, SearchResult([a, b], grid_size=4))


def test_ranked_table_shows_each_knob_figure_and_reason(tmp_path: Path) -> None:
    c = console()
    c.print(ranked_table(sweep_result(tmp_path)))
    out = words(c)
    assert out.startswith("qbench sweep: 2 points # concurrency_limit goodput/s p50 p95 err rss MB why")
    # goodput with its repeats' 95 % interval (t = 12.71 for one degree of freedom: 18 +- 12.71)
    assert "1 2 18 [5.29-30.7] 0.1 s 0.2 s 2.0% - highest goodput" in out
    assert "2 1 10 0.1 s 0.2 s 0.0% 512 p95 too high" in out
    by_capacity = console()
    by_capacity.print(ranked_table(sweep_result(tmp_path, objective="capacity")))
    out = words(by_capacity)
    assert "# concurrency_limit capacity/s goodput/s" in out
    assert "1 2 - 18 [" in out and "2 1 12 10 0.1 s" in out


def test_render_sweep_with_a_winner(tmp_path: Path) -> None:
    c = console()
    render_sweep(sweep_result(tmp_path), c)
    out = words(c)
    assert "smart search: 2 of 4 grid points measured (2 trials saved, 50%)" in out
    assert "objective: latency (the default)" in out and "winner: c2: highest goodput 18 rps" in out
    assert "note: c2 sits on the grid's edge" in out
    assert "Gradio 4.x and later" in out and "demo.queue(default_concurrency_limit=2)" in out
    assert "max_size: keep the queue unbounded" in out and "capacity: not measured" in out
    assert out.endswith(f"files: {tmp_path / 'sweep-1'}")


def test_render_sweep_without_a_winner_stops_after_the_reason(tmp_path: Path) -> None:
    c = console()
    render_sweep(sweep_result(tmp_path, winner=False), c)
    out = words(c)
    assert out.endswith("no recommendation: no point met the SLO")
    assert "winner:" not in out and "files:" not in out


def test_render_sweep_names_the_points_whose_knobs_were_not_applied(tmp_path: Path) -> None:
    base = sweep_result(tmp_path)
    extra = result("c4", 4, 30.0)
    rec = replace(base.recommendation, ranked=[*base.recommendation.ranked,
                                               ranked(3, extra, "knobs_not_applied", "not applied")])
    c = console()
    render_sweep(replace(base, results=[*base.results, extra], recommendation=rec), c)
    assert "knobs not applied at c4: these points measured the app's own settings" in words(c)


def test_sweep_progress_prints_each_point_and_the_best_so_far() -> None:
    c = console()
    with SweepProgress(3, c) as progress:
        ok = result("c1", 1, 10.0)
        progress.point_done(ok, ok)
        stopped = result("c2", 2, 5.0, status="stopped", reason="backlog grew")
        progress.point_done(stopped, ok)
        assert progress.best == "c1 10 rps"
    out = text(c)
    assert "  c1: goodput 10 rps, p95 0.2 s\n" in out and "  c2: goodput 5 rps, p95 0.2 s" in out
    assert "backlog grew" in out and "best c1 10 rps" in out
    assert "c2" not in progress.best  # a stopped point with less goodput is not the best


def test_sweep_progress_shows_a_points_status() -> None:
    c = console()
    with SweepProgress(1, c) as progress:
        progress.point_done(result("c2", 2, 5.0, status="stopped", reason="backlog grew"), None)
    assert "  c2: goodput 5 rps, p95 0.2 s [stopped] backlog grew" in text(c)


def test_a_printed_probe_line_keeps_its_steadiness_evidence() -> None:
    c = console()
    show_probe(c, Probe(10.0, True, steadiness=STEADY))  # as `qbench capacity` and `qbench plan` print it
    assert "[arrivals 10/s, completions 10/s]" in text(c)


def test_sweep_and_capacity_headers(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, rate=5)
    config = build_config(SweepOptions(str(path), grid=["concurrency_limit=1,2"], out_root=str(tmp_path)))
    assert sweep_header(config) == (f"sweep {config.sweep_dir} (relaunch, grid, 2 points, "
                                    f"objective {config.constraints.objective})")
    capacity = capacity_config(path, target="http://127.0.0.1:1", duration_s=4.0, max_duration_s=12.0,
                               confirm_duration_s=30.0, out_root=tmp_path)
    assert capacity_header(capacity) == (
        "capacity of http://127.0.0.1:1 under p95_latency_s <= 1 (4 s bracketing probes, bisection up to "
        f"12 s, 30 s confirmation, tolerance 10%): {capacity.out_dir}")
    assert ", 30 s confirmation" not in capacity_header(replace(capacity, plan=replace(capacity.plan,
                                                                                       confirm=False)))


def test_render_capacity_prints_the_table_the_answer_and_the_folder(tmp_path: Path) -> None:
    run = CapacityRun(tmp_path, Capacity(40.0, 44.0, 0.1, True, probes=[Probe(40.0, True)]), 10.0, None,
                      [("capacity", "40 req/s"), ("latency", "p95 0.45 s")])
    c = console()
    render_capacity(run, c)
    lines = text(c).splitlines()
    assert "qbench capacity: 1 probes" in lines[0]
    assert lines[-3:] == ["capacity: 40 req/s", "latency: p95 0.45 s", f"files: {tmp_path}"]


def test_render_plan_indents_a_multi_line_value_under_its_label(tmp_path: Path) -> None:
    measured = Replica(capacity_rps=50.0, mean_latency_s=0.2, p95_latency_s=0.4, slo="p95_latency_s <= 0.5",
                        source="capacity.json")
    plan = replace(make_plan(measured, traffic(None, None, None, 100.0), 0.3),
                   lines=[("replicas", "3 = ceil(...)"), ("settings", "demo.queue(\n[x] = 1\n)")])
    c = console()
    render_plan(PlanRun(plan, tmp_path / "plan.json"), c)
    # the code is printed as it is: "[x]" is not taken for rich markup
    assert text(c).splitlines() == ["replicas: 3 = ceil(...)", "settings: demo.queue(", "    [x] = 1",
                                    "    )", f"files: {tmp_path / 'plan.json'}"]
