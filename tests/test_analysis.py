"""qbench.analysis: runs and sweeps as DataFrames, on a real run, fabricated runs and a fabricated sweep,
and docs/reports.md's notebook example executed as written."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qbench
from qbench.analysis import join_runs, load_run, load_sweep
from qbench.errors import QbenchError
from qbench.run.records.schema import DERIVED, FIELD_NAMES
from qbench.run.scenario.schema import parse_scenario
from reference_server.testing import RunningServer

sys.path.insert(0, str(Path(__file__).parent / "report"))
from report_synth import simulate, write_run, write_sweep  # noqa: E402

REPORTS_DOC = Path(__file__).resolve().parents[1] / "docs" / "reports.md"
Factory = Callable[..., AbstractContextManager[RunningServer]]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("sweeps") / "sweep-synthetic")


def test_a_real_run_loads_with_every_column_and_the_summary_it_printed(
    server_factory: Factory, tmp_path: Path
) -> None:
    scenario = parse_scenario({
        "name": "analysis",
        "endpoint": {"api_name": "work"},
        "payload": {"inputs": [{"text": {"words": [2, 5]}}]},
        "load": {"rate": 40, "duration": 1, "timeout": 10, "warmup": 0.25},
    })
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 10}, "concurrency_limit": 4}
    with server_factory(functions=[work]) as server:
        result = qbench.run_scenario(scenario, target=server.url, out_dir=tmp_path / "run", live=False)
    run = qbench.load_run(result.run_dir)
    df = run.records
    assert len(df) == 40 and set(FIELD_NAMES) | set(DERIVED) | {"ok"} <= set(df.columns)
    assert df["ok"].all() and df["request_id"].tolist() == sorted(df["request_id"])
    assert df["warmup"].any() and not df["warmup"].all()
    assert np.allclose(df["latency_s"], df["completed_at_s"] - df["intended_at_s"])
    assert run.summary.phase("latency_s").p95 == pytest.approx(result.summary.phase("latency_s").p95)
    assert run.scenario["name"] == "analysis" and run.info.target == server.url
    windows = run.percentiles("latency_s", window_s=0.5)
    assert windows["count"].sum() == (~df["warmup"]).sum()
    assert (windows["p50"] <= windows["p99"]).all()
    assert run.errors_over_time(window_s=0.5)["ok"].sum() == 40
    assert run.phase_table().loc["service_s", "count"] == (~df["warmup"]).sum()
    split = run.time_split()  # the reference server reports its phases: where the time went
    assert split.loc[("work", "server_fn_s"), "p50"] >= 0.009  # the 10 ms sleep
    assert split.loc[("work", "client_only_s"), "p50"] == pytest.approx(
        result.summary.server_phases["client_only_s"].p50)


def test_percentiles_are_over_ok_requests_and_errors_are_counted_by_kind(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", simulate(n=300, max_queue=5, fail_every=20)))
    df = run.records
    measured_ok = df[df["ok"] & ~df["warmup"]]
    table = run.percentiles("queue_wait_s", window_s=5, q=(50, 90))
    assert list(table.columns) == ["count", "p50", "p90"]
    assert table["count"].sum() == len(measured_ok)
    first = measured_ok[measured_ok["intended_at_s"] < 5]["queue_wait_s"]
    assert table.loc[0.0, "p90"] == pytest.approx(np.percentile(first, 90))
    errors = run.errors_over_time(window_s=5)
    assert {"ok", "queue_full", "server_error"} <= set(errors.columns)
    assert errors.to_numpy().sum() == len(df)  # warm-up included by default
    assert errors["queue_full"].sum() == (df["error_kind"] == "queue_full").sum()
    with_warmup = run.percentiles("latency_s", window_s=5, warmup=True)
    assert with_warmup["count"].sum() == df["ok"].sum()


def test_a_run_that_died_reads_from_jsonl_with_a_note(tmp_path: Path) -> None:
    data = Path(__file__).parent / "report" / "data"
    shutil.copy(data / "golden_records.jsonl", tmp_path / "records.jsonl")
    shutil.copy(data / "golden_run.json", tmp_path / "run.json")
    run = load_run(tmp_path)
    assert len(run.records) > 0 and any("records.parquet is missing" in n for n in run.notes)
    assert run.records["ok"].dtype == bool


def test_bad_arguments_say_what_to_use(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", simulate(n=50)))
    with pytest.raises(ValueError, match="try one of .*queue_wait_s"):
        run.percentiles("queue_time")
    with pytest.raises(ValueError, match="window_s must be > 0"):
        run.percentiles("latency_s", window_s=0)
    with pytest.raises(QbenchError, match="not a directory"):
        load_run(tmp_path / "missing")
    with pytest.raises(QbenchError, match="not a sweep folder"):
        load_sweep(tmp_path / "r")


def test_join_runs_pairs_requests_by_id(tmp_path: Path) -> None:
    a = load_run(write_run(tmp_path / "a", simulate(n=200, service_s=0.05, seed=3)))
    b = load_run(write_run(tmp_path / "b", simulate(n=200, service_s=0.10, seed=3)))
    paired = join_runs(a, b)
    assert len(paired) == 200 and paired.index.name == "request_id"
    assert (paired["intended_at_s_a"] == paired["intended_at_s_b"]).all()  # same schedule
    assert paired["service_s_diff"].median() > 0  # B's service time is twice A's
    row = paired.loc[7]
    assert row["latency_s_diff"] == pytest.approx(row["latency_s_b"] - row["latency_s_a"])


def test_a_sweep_loads_its_points_and_point_records_on_demand(sweep_dir: Path) -> None:
    sweep = load_sweep(sweep_dir)
    assert sweep.knobs == ["concurrency_limit", "max_batch_size", "max_threads"]
    assert sweep.points["rank"].tolist() == sorted(sweep.points["rank"])
    assert sweep.winner == sweep.points.iloc[0]["point_id"]
    failed = sweep.points[sweep.points["status"] == "failed"]["point_id"].tolist()
    every = sweep.records()
    assert list(every.columns[:4]) == ["point_id", *sweep.knobs]
    assert set(every["point_id"]) == set(sweep.points["point_id"]) - set(failed)
    winner = sweep.run(str(sweep.winner))
    assert winner is sweep.run(str(sweep.winner))  # read once
    assert len(every[every["point_id"] == sweep.winner]) == len(winner.records)
    with pytest.raises(QbenchError, match="no point 'nope'"):
        sweep.run("nope")


def _readme_example() -> str:
    text = REPORTS_DOC.read_text(encoding="utf-8")
    section = text.split("## Analyse in a notebook", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/reports.md's analysis section has no python example"
    return match.group(1)


def test_the_readme_notebook_example_runs(
    tmp_path: Path, sweep_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _readme_example()
    paths = {
        "reports/run-image-20261123-101500": write_run(tmp_path / "a", simulate(n=200, seed=5)),
        "reports/run-image-20261123-103000": write_run(tmp_path / "b", simulate(n=200, seed=5, workers=1)),
        "reports/sweep-image-20261123-101500": shutil.copytree(sweep_dir, tmp_path / "sweep"),
    }
    for placeholder, path in paths.items():
        assert f'"{placeholder}"' in code, placeholder
        code = code.replace(f'"{placeholder}"', repr(str(path)))
    exec(compile(code, str(REPORTS_DOC), "exec"), {})
    printed = capsys.readouterr().out
    assert "p95" in printed and "latency_s_diff" in printed and "point_id" in printed
    assert isinstance(load_run(paths["reports/run-image-20261123-101500"]).records, pd.DataFrame)


# ---------------------------------------------------------------- lazily, a column at a time


def _old_views(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """percentiles, errors_over_time, phase_table and time_split as they were computed before, from the
    whole records frame."""
    from qbench.analysis import PHASES
    from qbench.run.results.summary import SERVER_PHASES

    measured = df[~df["warmup"]]
    rows = measured[measured["ok"] & measured["service_s"].notna() & measured["intended_at_s"].notna()]
    window = ((rows["intended_at_s"] // 2.0) * 2.0).rename("window_start_s")
    grouped = rows.groupby(window)["service_s"]
    percentiles = pd.DataFrame({"count": grouped.size()})
    for value in (50, 95, 99):
        percentiles[f"p{value:g}"] = grouped.quantile(value / 100.0)
    percentiles.index.name = "window_start_s"
    when = df["completed_at_s"].fillna(df["sent_at_s"]).fillna(df["intended_at_s"])
    kind = df["error_kind"].where(~df["ok"], "ok").fillna("unknown")
    errors = pd.crosstab(((when // 2.0) * 2.0).rename("window_start_s"), kind)
    errors.index.name, errors.columns.name = "window_start_s", None
    ok = measured[measured["ok"]]
    phases = {}
    for phase in PHASES:
        values = ok[phase].dropna().to_numpy()
        stats = {"count": float(values.size), "mean": float(values.mean()) if values.size else np.nan}
        stats.update({f"p{v:g}": float(np.percentile(values, v)) if values.size else np.nan
                      for v in (50, 90, 95, 99)})
        phases[phase] = stats
    split = {}
    for endpoint, group in ok.groupby("endpoint", sort=True):
        for phase in SERVER_PHASES:
            values = group[phase].dropna().to_numpy(dtype=float)
            if values.size:
                stats = {"count": float(values.size)}
                stats.update({f"p{v:g}": float(np.percentile(values, v)) for v in (50, 90)})
                split[(str(endpoint), phase)] = stats
    table = pd.DataFrame.from_dict(split, orient="index")
    table.index = pd.MultiIndex.from_tuples(list(split), names=["endpoint", "phase"])
    return {"percentiles": percentiles, "errors": errors,
            "phase_table": pd.DataFrame.from_dict(phases, orient="index"), "time_split": table}


def test_the_views_read_column_by_column_are_the_views_of_the_whole_frame(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from end_of_run import chunk_records

    from qbench.analysis import records_frame

    records, _ = chunk_records(np.random.default_rng(4), 0, 3000, 0.0, 500.0, 1.0, 0.5)
    for k, r in enumerate(records):
        if r.ok and k % 3:
            r.server_total_s = (r.completed_at_s or 0.0) - (r.sent_at_s or 0.0) - 0.001
            r.server_fn_s, r.server_queue_wait_s = 0.5 * r.server_total_s, None if k % 4 else 0.002
    run = load_run(write_run(tmp_path / "r", records))
    assert "records" not in run.__dict__  # nothing per request read yet
    whole = records_frame(records)
    pd.testing.assert_frame_equal(run.records, whole)  # read from records.parquet, as the records give it
    old = _old_views(whole)
    pd.testing.assert_frame_equal(run.percentiles("service_s", window_s=2.0), old["percentiles"])
    pd.testing.assert_frame_equal(run.errors_over_time(window_s=2.0), old["errors"])
    pd.testing.assert_frame_equal(run.phase_table(), old["phase_table"])
    pd.testing.assert_frame_equal(run.time_split(), old["time_split"])
    some = run.frame("endpoint", "latency_s", "ok", "outputs", "rank", "error_kind", warmup=False)
    pd.testing.assert_frame_equal(some, whole[~whole["warmup"]][list(some.columns)], check_dtype=True)
    with pytest.raises(ValueError, match="column 'nonsense'"):
        run.frame("nonsense")


def test_a_run_of_a_million_requests_loads_lazily_in_bounded_memory(tmp_path: Path) -> None:
    """records.parquet of 1 M rows (the columns the views use; an older file lacks the rest) and its
    summary.json: load_run reads neither records nor frames; a view holds a few columns, not the run."""
    import json
    import tracemalloc

    import pyarrow as pa
    import pyarrow.parquet as pq

    from qbench.run.records.schema import SCHEMA_VERSION

    n, rng = 1_000_000, np.random.default_rng(1)
    intended = np.cumsum(rng.exponential(0.001, n))
    service = rng.lognormal(np.log(0.05), 0.4, n)
    failed = rng.random(n) < 0.02
    table = pa.table({
        "request_id": np.arange(n), "user_id": np.zeros(n, dtype=np.int64),
        "session_id": pa.array(["s"] * n),
        "endpoint": pa.array(np.where(rng.random(n) < 0.7, "chat", "embed")),
        "warmup": intended < 5.0, "intended_at_s": intended, "sent_at_s": intended + 0.0005,
        "started_at_s": intended + 0.002, "completed_at_s": intended + 0.002 + service,
        "outcome": pa.array(np.where(failed, "error", "ok")),
        "error_kind": pa.array(np.where(failed, "server_error", None)),
    }).replace_schema_metadata({b"qbench_schema_version": str(SCHEMA_VERSION).encode()})
    pq.write_table(table, tmp_path / "records.parquet", row_group_size=250_000)
    del table
    (tmp_path / "summary.json").write_text(json.dumps({"requests": int((intended >= 5.0).sum())}))
    tracemalloc.start()
    run = load_run(tmp_path)
    windows = run.percentiles("service_s", window_s=60.0)
    errors = run.errors_over_time(window_s=60.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "records" not in run.__dict__ and run.summary.requests == int((intended >= 5.0).sum())
    assert peak < 150 * 2**20, f"{peak / 2**20:.0f} MiB: more than a few columns"  # the frame: ~1 GiB
    keep = ~failed & (intended >= 5.0)
    first = service[keep & (intended < 60.0)]
    assert windows.loc[0.0, "count"] == first.size
    assert windows.loc[0.0, "p95"] == pytest.approx(np.percentile(first, 95), rel=1e-12)
    assert errors.to_numpy().sum() == n and errors["server_error"].sum() == failed.sum()
