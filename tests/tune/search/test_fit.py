"""qbench.tune.search.fit: what the model and simulator searches share (batches from records, the
summary
observation, design points, the measured state, memory, a point's load). The batch reading of one
simple trace and the summary observation at a closed-loop load run in test_search_model.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from qbench.run.records.schema import Outcome, RequestRecord, write_parquet
from qbench.tune.knobs.grid import Point, build_grid
from qbench.tune.search.batch_model import FitError, Observation, PointLoad
from qbench.tune.search.fit import (
    SearchState,
    describe_point,
    design_points,
    fit_memory,
    memory_of,
    observation_from_result,
    observations_from_batches,
    point_runs,
    predicted_constraints,
    record_batches,
    records_observer,
    summary_observer,
)
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult


def rec(i: int, start: float | None, service: float, *, outcome: Outcome = "ok", warmup: bool = False
        ) -> RequestRecord:
    done = None if start is None else start + service
    return RequestRecord(i, 0, "s", "predict", warmup, 0.0, started_at_s=start, completed_at_s=done,
                         outcome=outcome)


def test_record_batches_skip_warmup_failed_and_unstarted_requests() -> None:
    records = [rec(0, 1.0, 0.1), rec(1, 1.001, 0.1, warmup=True), rec(2, 1.002, 0.1, outcome="error"),
               rec(3, None, 0.1), rec(4, 1.003, 0.12)]
    assert record_batches(records, PointLoad(1, 8)) == [[pytest.approx(0.1), pytest.approx(0.12)]]


def test_a_batch_holds_at_most_the_cap_and_starts_within_the_tolerance() -> None:
    # five starts 1 ms apart with B = 2: [2, 2, 1]; a start 6 ms after a batch's first opens a new one
    records = [rec(i, 1.0 + i / 1e3, 0.05) for i in range(5)]
    assert [len(b) for b in record_batches(records, PointLoad(1, 2))] == [2, 2, 1]
    spread = [rec(0, 1.0, 0.05), rec(1, 1.004, 0.05), rec(2, 1.006, 0.05)]
    assert [len(b) for b in record_batches(spread, PointLoad(1, 8))] == [2, 1]
    assert [len(b) for b in record_batches(spread, PointLoad(1, 8), tol_s=0.01)] == [3]


def test_the_servers_batch_sizes_win_over_start_times_a_busy_client_read_apart() -> None:
    """The reference server says each request's batch size: a batch of 4 whose process_starts the client
    read 8 ms apart is still one batch of 4 (by the starts alone: four batches of 1, each as slow as
    the batch, and a fit whose slope is wrong); a remainder short of its size is left out."""
    records = [rec(i, 1.0 + 0.008 * i, 0.09) for i in range(4)]
    records += [rec(4 + i, 2.0 + 0.008 * i, 0.05) for i in range(3)]
    assert [len(b) for b in record_batches(records, PointLoad(1, 4))] == [1] * 7
    for r in records[:4]:
        r.server_batch_size = 4
    for r in records[4:]:
        r.server_batch_size = 2
    batches = record_batches(records, PointLoad(1, 4))
    assert batches == [[pytest.approx(0.05)] * 2, [pytest.approx(0.09)] * 4]


def test_a_batchs_service_time_is_the_servers_own_where_it_said() -> None:
    """A busy client read one batch's process_completed 0.3 s late for one member and on time for the
    other: on its clock the batch took 0.09 s and 0.39 s. The server timed it (server_total_s 0.09 s
    each): that is the service time the model fits; a record without it keeps the client's."""
    records = [rec(0, 1.0, 0.09), rec(1, 1.0, 0.39), rec(2, 2.0, 0.07)]
    for r in records:
        r.server_batch_size = 2 if r.request_id < 2 else 1
    records[0].server_total_s = records[1].server_total_s = 0.09
    assert record_batches(records, PointLoad(1, 2)) == [[pytest.approx(0.07)],
                                                        [pytest.approx(0.09), pytest.approx(0.09)]]


def test_observations_pool_batches_by_size_median_of_medians() -> None:
    batches = [[0.1, 0.3, 0.2], [0.5], [0.2, 0.2, 0.4], [0.7], [0.6], [1.0, 2.0]]
    obs = observations_from_batches(batches, PointLoad(workers=3, max_batch=4))
    assert obs == [Observation(1, 0.6, 3, weight=3), Observation(2, 1.5, 3, weight=1),
                   Observation(3, 0.2, 3, weight=2)]
    assert observations_from_batches([], PointLoad(1, 1)) == []


@pytest.mark.parametrize(
    ("result", "load", "expected"),
    [
        (PointResult("p", {}, status="failed", throughput_rps=10.0, p50_service_s=0.1), PointLoad(1, 8), []),
        (PointResult("p", {}, throughput_rps=0.0, p50_service_s=0.1), PointLoad(1, 8), []),
        # service time known: b = X s / k, clamped to [1, B]
        (PointResult("p", {}, throughput_rps=1000.0, p50_service_s=0.1), PointLoad(2, 8),
         [Observation(8.0, 0.1, 2)]),
        (PointResult("p", {}, throughput_rps=1.0, p50_service_s=0.1), PointLoad(2, 8),
         [Observation(1.0, 0.1, 2)]),
        # open loop without a service time: nothing to read it from
        (PointResult("p", {}, throughput_rps=10.0), PointLoad(1, 8, rate_rps=10.0), []),
        # closed loop: 3 users on 4 workers -> batches of 1 on 3 busy workers, l = 3 x 1 / X
        (PointResult("p", {}, throughput_rps=30.0), PointLoad(4, 8, users=3), [Observation(1.0, 0.1, 4)]),
        # unknown load: saturation, batches of B on every worker
        (PointResult("p", {}, throughput_rps=40.0), PointLoad(2, 4), [Observation(4.0, 0.2, 2)]),
    ],
)
def test_observation_from_a_summary(
    result: PointResult, load: PointLoad, expected: list[Observation]
) -> None:
    assert observation_from_result(result, load) == expected


def test_design_points_are_the_batch_ends_by_workers_middle_and_top() -> None:
    grid = build_grid(["concurrency_limit=1,2,4", "max_batch_size=1,4,16", "batch_wait_ms=0,5"])
    assert design_points(grid) == [(1, 0, 1), (2, 0, 1), (1, 2, 1), (2, 2, 1)]
    no_batch = build_grid(["users=1,2,3"])
    assert design_points(no_batch) == [(1,)]
    one_worker = build_grid(["max_threads=8", "max_batch_size=1,2"])  # middle and top coincide: kept once
    assert design_points(one_worker) == [(0, 0), (0, 1)]


def test_the_state_measures_each_point_once_and_fits_only_ok_points() -> None:
    calls: list[str] = []

    def evaluate(point: Point) -> PointResult:
        calls.append(point.point_id)
        b = int(str(point.knobs["max_batch_size"]))
        return PointResult(point.point_id, dict(point.knobs), status="failed" if b == 2 else "ok",
                           throughput_rps=1.0,
                           p50_service_s=0.05 + 0.01 * b)

    def observe(point: Point, result: PointResult) -> list[Observation]:
        return [Observation(float(str(point.knobs["max_batch_size"])), result.p50_service_s or 0.0, 1)]

    grid = build_grid(["max_batch_size=1,2,8"])
    state = SearchState(grid, evaluate, Constraints(), lambda p: PointLoad(1, 1), observe)
    first, failed, last = grid.points()
    with pytest.raises(FitError):
        state.fit()
    assert state.measure(first) is state.measure(first) and calls == ["b1"]
    state.measure(failed)
    with pytest.raises(FitError, match="1 distinct"):  # the failed b = 2 is not observed
        state.fit()
    state.measure(last)
    fit = state.fit()
    assert (fit.t0_s, fit.alpha_s) == pytest.approx((0.05, 0.01)) and fit.observations == 2
    assert [r.point_id for r in state.order] == calls == ["b1", "b2", "b8"]


def test_predicted_constraints_keep_the_bounds_a_prediction_has() -> None:
    constraints = Constraints(slo={"p95_latency_s": 1.0, "p95_queue_wait_s": 0.5, "min_goodput": 3.0,
                                   "error_rate": 0.1, "mean_latency_s": 0.4},
                              max_memory_mb=100.0, objective="capacity")
    out = predicted_constraints(constraints)
    assert out.slo == {"p95_latency_s": 1.0, "min_goodput": 3.0, "mean_latency_s": 0.4}
    assert out.objective == "latency" and out.max_memory_mb == 100.0
    assert constraints.slo["p95_queue_wait_s"] == 0.5  # the original is unchanged


def rss(mb: float | None) -> PointResult:
    return PointResult("p", {}, peak_rss_mb=mb)


def test_memory_is_fitted_linear_in_work_slots_and_threads() -> None:
    loads = [PointLoad(1, 1, threads=4), PointLoad(2, 4, threads=4), PointLoad(1, 1, threads=40),
             PointLoad(4, 4, threads=8), PointLoad(8, 8, threads=1)]
    truth = [300 + 2.0 * ld.workers * ld.max_batch + 0.5 * ld.threads for ld in loads]
    coef = fit_memory([rss(mb) for mb in truth], loads)
    assert coef == pytest.approx((300.0, 2.0, 0.5))
    # points without a memory figure are left out; fewer than 3 with one -> no fit
    assert fit_memory([rss(truth[0]), rss(None), rss(truth[2]), rss(None)], loads[:4]) is None
    with pytest.raises(ValueError):
        fit_memory([rss(1.0)], loads)  # results and loads must pair up


def test_memory_of_predicts_only_under_a_memory_ceiling_with_enough_points() -> None:
    loads = {"a": PointLoad(1, 1, threads=4), "b": PointLoad(2, 4, threads=4),
             "c": PointLoad(1, 1, threads=40), "d": PointLoad(4, 4, threads=8)}

    def state(ceiling: float | None, ids: str) -> SearchState:
        s = SearchState(build_grid(["users=1"]), lambda p: rss(None), Constraints(max_memory_mb=ceiling),
                        lambda p: loads[str(p.knobs["tag"])], lambda p, r: [])
        for pid in ids:
            ld = loads[pid]
            s.points[pid] = Point({"tag": pid})
            mb = 100 + 10.0 * ld.workers * ld.max_batch + ld.threads
            s.order.append(PointResult(pid, {}, peak_rss_mb=mb))
        return s

    new = PointLoad(8, 2, threads=10)
    assert memory_of(state(None, "abcd"))(new) is None
    assert memory_of(state(1000.0, "ab"))(new) is None
    assert memory_of(state(1000.0, "abcd"))(new) == pytest.approx(100 + 160 + 10)


@pytest.mark.parametrize(
    ("defaults", "knobs", "load", "expected"),
    [
        # the limit and max_threads bound the workers; max_batch_size defaults to 1; users from the scenario
        ({"max_threads": 40}, {"concurrency_limit": 4}, {"users": 8},
         PointLoad(4, 1, users=8, threads=40)),
        ({}, {"concurrency_limit": 8, "max_threads": 2, "max_batch_size": 4}, {"rate": 5.0},
         PointLoad(2, 4, rate_rps=5.0, threads=2)),
        # "none" (unlimited) and unset read as max_threads' default, 40
        ({}, {"concurrency_limit": "none", "max_threads": "default"}, {"users": 1},
         PointLoad(40, 1, users=1)),
        # Gradio 4's default_concurrency_limit and Gradio 3's concurrency_count are the limit where unset
        ({"default_concurrency_limit": 3}, {}, {"users": 1}, PointLoad(3, 1, users=1)),
        ({}, {"concurrency_count": 6, "max_threads": 4}, {"users": 1}, PointLoad(4, 1, users=1, threads=4)),
        # a bool is not a count; 0 is raised to one worker
        ({}, {"concurrency_limit": True, "max_batch_size": 0}, {"users": 1}, PointLoad(40, 1, users=1)),
        ({}, {"concurrency_limit": 0}, {"users": 1}, PointLoad(1, 1, users=1)),
        # client knobs override the scenario's load: a swept rate makes it open loop and vice versa
        ({}, {"rate": 12}, {"users": 4}, PointLoad(40, 1, rate_rps=12.0)),
        ({}, {"users": 6, "load.think_time": 2}, {"rate": 3.0, "think_time": 1.0},
         PointLoad(40, 1, users=6, think_s=2.0)),
        ({}, {}, {"users": 2, "think_time": 1.5}, PointLoad(40, 1, users=2, think_s=1.5)),
    ],
)
def test_describe_point(defaults: dict[str, object], knobs: dict[str, object], load: dict[str, object],
                        expected: PointLoad) -> None:
    describe = describe_point(defaults, SimpleNamespace(**load))
    assert describe(Point(knobs)) == expected  # type: ignore[arg-type]


def test_point_runs_are_the_point_then_its_probes_in_order(tmp_path: Path) -> None:
    for name in ("02-rate-20", "01-rate-10", "10-confirm-15"):
        (tmp_path / "capacity" / name).mkdir(parents=True)
    (tmp_path / "capacity" / "notes.txt").write_text("not a run")
    assert point_runs(tmp_path) == [tmp_path, *(tmp_path / "capacity" / n for n in
                                                ("01-rate-10", "02-rate-20", "10-confirm-15"))]
    assert point_runs(tmp_path / "missing") == [tmp_path / "missing"]


def test_records_observer_pools_the_point_and_its_probes_else_reads_the_summary(tmp_path: Path) -> None:
    point = Point({"max_batch_size": 4})
    run, probe = tmp_path / point.point_id, tmp_path / point.point_id / "capacity" / "01-rate-50"
    probe.mkdir(parents=True)
    write_parquet([rec(0, 1.0, 0.06), rec(1, 2.0, 0.06)], run / "records.parquet")  # two batches of 1
    write_parquet([rec(i, 1.0 + i / 1e4, 0.09) for i in range(4)], probe / "records.parquet")  # one of 4
    (tmp_path / "other" / point.point_id).mkdir(parents=True)
    (tmp_path / "other" / point.point_id / "records.parquet").write_text("not parquet")  # unreadable
    describe = describe_point({}, SimpleNamespace(users=8))
    observe = records_observer(tmp_path, describe)
    result = PointResult(point.point_id, {}, throughput_rps=100.0, p50_service_s=0.02)
    found = observe(point, result)
    assert [(o.batch_size, o.workers, o.weight) for o in found] == [(1, 40, 2), (4, 40, 1)]
    assert [o.service_s for o in found] == pytest.approx([0.06, 0.09])
    summary = summary_observer(describe)(point, result)
    assert summary == observation_from_result(result, describe(point)) and len(summary) == 1
    assert records_observer(tmp_path / "other", describe)(point, result) == summary
