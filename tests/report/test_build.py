"""The report's tables and headlines (qbench.report.build) from runs, sweeps and capacity searches
built in memory: SLO rows, a run's headline, phases and errors, details shown or cut, sweep point and
predicted rows, capacity rows, and both documents written from a context without charts. (Whole
reports from folders: test_report_run.py, test_sweep_report.py, test_capacity_report.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qbench.errors import QbenchError
from qbench.report.build import (
    MAX_JSON_CHARS,
    ReportContext,
    _json,
    _present,
    alongside_lines,
    capacity_headline,
    error_rows,
    phase_rows,
    point_rows,
    predicted_rows,
    probe_rows,
    run_details,
    run_headline,
    slo_row,
    sweep_context,
    write_documents,
)
from qbench.report.capacity_charts import LoadedCapacity
from qbench.report.rundir import LoadedRun
from qbench.report.sweep_charts import LoadedSweep, _knobs
from qbench.run.records.schema import RequestRecord
from qbench.run.results.run_info import RunInfo
from qbench.run.results.summary import SloCheck, summarize
from qbench.run.scenario.schema import Slo
from qbench.tune.ranking.recommend import RankedPoint, Recommendation
from qbench.tune.values.capacity_file import CapacityFile
from qbench.tune.values.sweep_info import SweepInfo


@pytest.mark.parametrize(("check", "row"), [
    (SloCheck("p95_latency_s", 0.5, 0.4321, True, "max"), ["p95_latency_s", "<= 0.5", "0.4321", "pass"]),
    (SloCheck("min_goodput", 10, 3.0, False, "min"), ["min_goodput", ">= 10", "3", "FAIL"]),
    (SloCheck("p95_ttft_s", 1, None, False, "max", note="no tokens"),
     ["p95_ttft_s", "<= 1", "no tokens", "FAIL"]),
    (SloCheck("p95_ttft_s", 1, None, False, "max"), ["p95_ttft_s", "<= 1", "-", "FAIL"]),
])
def test_slo_rows(check: SloCheck, row: list[str]) -> None:
    assert slo_row(check) == row


def rec(i: int, *, ok: bool = True, kind: str | None = None, message: str | None = None,
        warmup: bool = False) -> RequestRecord:
    t = i * 0.1
    return RequestRecord(request_id=i, user_id=0, session_id="s", endpoint="/p", warmup=warmup,
                         intended_at_s=t, sent_at_s=t, started_at_s=t + 0.05, completed_at_s=t + 0.2,
                         outcome="ok" if ok else "error", error_kind=kind, error_message=message)


def run(records: list[RequestRecord], info: dict[str, Any] | None = None,
        slo: Slo | None = None) -> LoadedRun:
    run_info = RunInfo.from_dict(info or {})
    return LoadedRun(Path("/runs/r1"), records, run_info, summarize(records, slo))


def test_a_run_headline() -> None:
    records = [rec(i) for i in range(8)] + [rec(8, ok=False, kind="timeout"), rec(9, warmup=True)]
    loaded = run(records, {"target": "http://h", "stop_kind": "deadline", "stop_reason": "time is up"},
                 Slo.model_validate({"p95_latency_s": 0.01}))
    rows = dict(run_headline(loaded))
    assert rows["target"] == "http://h" and rows["started"] == "unknown"
    assert rows["requests"] == "9 measured (9 sent, 0 not sent); 1 warm-up excluded"
    assert rows["ok / errors"] == "8 / 1 (error rate 11.11%)"
    assert rows["latency p50 / p95 / p99"] == "200 ms / 200 ms / 200 ms"
    assert rows["SLO"] == "FAILED: p95_latency_s" and rows["stopped"] == "deadline: time is up"
    assert "login" not in rows and "tokens" not in rows


def test_phase_rows_list_the_phases_requests_had() -> None:
    rows = phase_rows(run([rec(i) for i in range(4)]).summary)
    assert rows[0] == ["latency from intended send", "4"] + ["200 ms"] * 6  # n, mean, p50..p99, max
    assert [r[0] for r in rows] == ["latency from intended send", "latency from actual send", "queue wait",
                                    "service time", "send lag"]  # no time to first output: none streamed


def test_error_rows_count_kinds_with_an_example_message_most_frequent_first() -> None:
    records = [rec(0, ok=False, kind="connect", message="refused"),
               rec(1, ok=False, kind="timeout", message="x" * 300), rec(2, ok=False, kind="timeout"),
               rec(3, ok=False, kind="queue_full", message="warm", warmup=True), rec(4)]
    rows = error_rows(run(records))
    assert [r[:3] for r in rows] == [["timeout", "2", "50.0%"], ["connect", "1", "25.0%"]]
    assert rows[0][3] == "x" * 160 and rows[1][3] == "refused"
    assert error_rows(run([])) == []


def test_run_details_show_only_what_is_there_and_cut_long_json() -> None:
    titles = [t for t, _ in run_details(RunInfo.from_dict({}))]
    assert "Scenario" not in titles and "Server config (/config)" not in titles
    info = RunInfo.from_dict({"scenario": {"name": "s"}, "server": {"config": {"x": "y" * 30_000}}})
    details = dict(run_details(info))
    assert details["Scenario"] == '{\n  "name": "s"\n}'
    cut = details["Server config (/config)"]
    assert len(cut) < MAX_JSON_CHARS + 50 and cut.endswith("... (cut; see run.json)")


@pytest.mark.parametrize(("value", "shown"), [
    (None, False), ({}, False), ({"a": None, "b": {}}, False), ({"a": {"b": 0}}, False),
    ({"a": {"b": 1}}, True), ([0], True), ("x", True), (0, False),
])
def test_present(value: Any, shown: bool) -> None:
    assert _present(value) is shown


def test_json_keeps_what_it_cannot_encode_as_text() -> None:
    assert _json({"p": Path("/x")}) == '{\n  "p": "/x"\n}'


def test_a_run_without_a_scenario_has_no_alongside_lines() -> None:
    loaded = run([rec(0)])
    assert alongside_lines(loaded, None) == []


def sweep(rows: list[dict[str, Any]], rec: Recommendation | None = None) -> LoadedSweep:
    info = SweepInfo.from_dict({"grid": {"axes": {"c": [1, 2], "t": [4]}}})
    return LoadedSweep(Path("/sweeps/s"), info, rows, rec, _knobs(info, rows))


def test_point_rows_best_rank_first_with_verdict_and_reason() -> None:
    rows = [{"point_id": "a", "c": 1, "t": 4, "rank": 2, "goodput_rps": 3.0, "p95_latency_s": 0.5,
             "error_rate": 0.25},
            {"point_id": "b", "c": 2, "t": 4, "rank": None, "status": "failed", "reason": "did not start"},
            {"point_id": "c", "c": 2, "t": 4, "rank": 1, "goodput_rps": 9.123, "p95_latency_s": 0.25}]
    ranked = [RankedPoint(point_id="a", knobs={}, rank=2, goodput_rps=3.0, p95_latency_s=0.5,
                          verdict="feasible", reason="slower")]
    got = point_rows(sweep(rows, Recommendation(winner=None, ranked=ranked, why="")))
    assert got == [["1", "", "c=2", "9.12", "250 ms", "0.0%", ""],
                   ["2", "feasible", "c=1", "3.00", "500 ms", "25.0%", "slower"],
                   ["", "failed", "c=2", "-", "-", "0.0%", "did not start"]]


def test_predicted_rows_side_by_side() -> None:
    search = {"predicted_vs_measured": [
        {"point_id": "p1", "role": "probe", "predicted": {"throughput_rps": 10, "p95_latency_s": 0.2},
         "measured": {"throughput_rps": 9.5, "p95_latency_s": "n/a", "capacity_rps": 12}},
        {"point_id": "p2"}]}
    assert predicted_rows(search) == [["p1", "probe", "10.00", "9.50", "200 ms", "-", "-", "12.00"],
                                      ["p2", "", "-", "-", "-", "-", "-", "-"]]
    assert predicted_rows({}) == [] and predicted_rows({"predicted_vs_measured": "odd"}) == []


def test_a_sweep_report_refuses_a_knob_that_was_not_swept(tmp_path: Path) -> None:
    data = sweep([{"point_id": "a", "c": 1, "t": 4}, {"point_id": "b", "c": 2, "t": 4}])
    with pytest.raises(QbenchError, match="'t' is not a swept knob; choose from c"):
        sweep_context(data, tmp_path / "charts", ("c", "t"))
    assert not (tmp_path / "charts").exists()  # refused before any chart is drawn


def capacity() -> LoadedCapacity:
    probes = [{"rate_rps": 30.0, "kind": "estimate", "users": 16, "passed": False, "verdict": "estimate"},
              {"rate_rps": 30.0, "kind": "rate", "passed": True, "throughput_rps": 29.5, "p50_latency_s": 0.1,
               "p95_latency_s": 0.15, "error_rate": 0.0, "verdict": "pass"},
              {"rate_rps": 28.0, "kind": "confirm", "duration_s": 60.0, "passed": True, "verdict": "pass"}]
    file = CapacityFile.from_dict({"target": "http://h", "slo": {"p95_latency_s": 0.2},
                                   "max_error_rate": 0.01, "probe_duration_s": 5.0,
                                   "answer": [["capacity", "28 req/s"]],
                                   "result": {"capacity_rps": 28.0, "tolerance": 0.05, "converged": True,
                                              "probes": probes}})
    return LoadedCapacity(Path("/c"), file, plan=[("replicas", "3 at peak:\nsettings")])


def test_capacity_headline_and_probe_rows() -> None:
    rows = capacity_headline(capacity())
    assert rows == [("target", "http://h"), ("SLO", "p95_latency_s <= 0.2; error_rate <= 1.0%"),
                    ("capacity", "28 req/s"),
                    ("probes", "1 open-loop of 5.00 s, tolerance 5.0%, converged"),
                    ("plan: replicas", "3 at peak: settings")]
    assert probe_rows(capacity()) == [
        ["0", "16 users", "0.00", "-", "-", "-", "0.0%", "estimate", ""],
        ["1", "30.00", "29.50", "100 ms", "150 ms", "-", "0.0%", "pass", ""],
        ["2", "confirm 60 s: 28.00", "0.00", "-", "-", "-", "0.0%", "pass", ""]]


def test_both_documents_are_written_from_a_context(tmp_path: Path) -> None:
    context = ReportContext(kind="run", title="qbench run: unit", source="/runs/r1",
                            headline=[("target", "http://h | b")], charts=[],
                            errors=[["timeout", "2", "50.0%", "a | b"]], notes=["run.json is missing"])
    files = write_documents(context, tmp_path / "out")
    markdown, html = files.markdown.read_text(), files.html.read_text()
    assert files.charts == [] and files.notes == ["run.json is missing"]
    assert "## qbench run: unit" in markdown and "- **target**: http://h | b" in markdown
    assert "| timeout | 2 | 50.0% | a \\| b |" in markdown  # a pipe in a table cell is escaped
    assert "run.json is missing" in markdown
    assert "<title>qbench run: unit" in html and "http://h | b" in html and "<img" not in html


def test_error_examples_from_the_columns_are_the_first_failed_measured_request_of_each_kind(
        tmp_path: Path) -> None:
    from qbench.report.build import error_examples
    from qbench.run.records.columns import Columns
    from qbench.run.records.schema import write_parquet

    records = [rec(0, ok=False, kind="timeout", message="early", warmup=True),  # the warm-up: not an example
               rec(1), rec(2, ok=False, kind="timeout"), rec(3, ok=False, kind="timeout", message="later"),
               rec(4, ok=False, message="x" * 300), rec(5, ok=False, kind="queue_full", message="full"),
               rec(6, ok=False, kind="client", message="second client")]
    old: dict[str, str] = {}  # the loop the report ran before the columns
    for r in records:
        if not r.ok and not r.warmup:
            old.setdefault(r.error_kind or "client", (r.error_message or "")[:160])
    write_parquet(records, tmp_path / "records.parquet")
    assert error_examples(Columns.read(tmp_path)) == old == error_examples(Columns.of(records))
    assert old == {"timeout": "", "client": "x" * 160, "queue_full": "full"}
    assert error_examples(Columns.of(records[:2])) == {}
