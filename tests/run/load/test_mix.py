"""A mix of endpoints in one run: parsing errors, routing by weight, per-endpoint summaries, and real
runs against the reference server (the real Gradio ones are in tests/gradio_versions)."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError, TargetError
from qbench.report.build import build_report
from qbench.report.compare import compare, parse_max_regression
from qbench.run.console import render_summary
from qbench.run.load.mix import branches, routing
from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import summarize
from qbench.run.scenario.schema import load_scenario
from reference_server.settings import load_preset
from reference_server.testing import RunningServer, serve_in_thread
from tests.run.conftest import scenario

ROOT = Path(__file__).resolve().parents[3]
Factory = Callable[..., AbstractContextManager[RunningServer]]
TEXT = {"inputs": [{"text": {"words": [2, 4]}}]}


def sleep_fn(name: str, ms: float, **extra: Any) -> dict[str, Any]:
    return {"api_name": name, "workload": "sleep", "params": {"base_ms": ms}, **extra}


def mix_scenario(load: dict[str, Any], weights: tuple[float, ...] = (3, 2, 1), **extra: Any) -> Any:
    entries = [{"weight": w, "endpoint": {"api_name": n}, "payload": TEXT}
               for w, n in zip(weights, "abc", strict=False)]
    return scenario(mix=entries, load=load, **extra)


# ---------------------------------------------------------------- scenario errors


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("endpoint: {api_name: x}\nmix:\n  - {endpoint: {api_name: a}}\n",
         r"m.yaml: invalid scenario.*\n  key 'mix': a mix replaces endpoint and payload .* "
         r"\{'api_name': 'x'\}"),
        ("mix:\n  - {weight: 0, endpoint: {api_name: a}}\n",
         r"key 'mix.0.weight': value 0: expected a weight > 0"),
        ("mix:\n  - {weight: 1, endpoint: {api_name: a}}\n  - {weight: -2, endpoint: {api_name: b}}\n",
         r"key 'mix.1.weight': value -2: expected a weight > 0"),
        ("mix:\n  - {endpoint: {api_name: a}}\n  - {endpoint: {method: GET}}\n",
         r"key 'mix.1': a gradio endpoint needs api_name"),
        ("mix: []\n", r"key 'mix': expected a list of at least one"),
        ("mix:\n  - {endpoint: {api_name: a}, wieght: 2}\n",
         r"key 'mix.0.wieght': .*unknown key; expected one of weight"),
    ],
)
def test_scenario_errors_name_the_file_key_and_value(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(body + "load: {rate: 5, duration: 2}\n")
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_duplicate_labels_need_a_name() -> None:
    spec = scenario(mix=[{"endpoint": {"api_name": "a"}}, {"endpoint": {"api_name": "a"}, "weight": 2}],
                    load={"rate": 5, "duration": 1})
    with pytest.raises(ScenarioError, match=r"key 'mix.1': value 'a': two entries .* give one a name"):
        branches(spec)
    named = scenario(mix=[{"endpoint": {"api_name": "a"}}, {"endpoint": {"api_name": "a"}, "name": "a-big"}],
                     load={"rate": 5, "duration": 1})
    assert [b.label for b in branches(named)] == ["a", "a-big"]


def test_a_dumped_mix_validates_again() -> None:
    from qbench.run.scenario.schema import with_overrides

    spec = mix_scenario({"rate": 5, "duration": 1})
    again = with_overrides(spec, {"load.rate": 7})
    assert again.mix == spec.mix and again.load.rate == 7


def test_an_endpoint_the_target_lacks_names_its_mix_entry(echo_server: RunningServer, tmp_path: Path) -> None:
    entries = [{"endpoint": {"api_name": "echo"}, "payload": TEXT},
               {"endpoint": {"api_name": "nope"}, "payload": TEXT}]
    spec = scenario(mix=entries, load={"requests": 2, "rate": 5})
    message = r"key 'mix.1.endpoint': value \{'api_name': 'nope'\}: .*no endpoint"
    with pytest.raises(TargetError, match=message):
        run_scenario(spec, target=echo_server.url, out_dir=tmp_path / "run", live=False)


# ---------------------------------------------------------------- routing


def test_open_loop_draws_follow_the_weights_and_repeat_with_the_seed() -> None:
    spec = mix_scenario({"rate": 100, "duration": 1})
    ids = list(range(6000))
    labels = [routing(spec, ids).label_for(i) for i in ids]
    counts = Counter(labels)
    assert abs(counts["a"] / 6000 - 0.5) < 0.03 and abs(counts["c"] / 6000 - 1 / 6) < 0.03
    assert labels == [routing(spec, ids).label_for(i) for i in ids]  # seeded: the same endpoints again
    parted = [routing(spec, ids[1::2]).label_for(i) for i in ids[1::2]]
    assert parted == labels[1::2]  # a part of a split plan agrees with the whole


def test_an_entry_that_starts_later_gets_no_request_before_its_start() -> None:
    """Open loop: a request planned before an entry's `start` draws among the others, with the same
    uniform draw (so the entries already running keep their share of the split); parts agree."""
    import numpy as np

    entries = [{"weight": 1, "endpoint": {"api_name": "a"}, "payload": TEXT},
               {"weight": 1, "endpoint": {"api_name": "b"}, "payload": TEXT, "start": 5}]
    spec = scenario(mix=entries, load={"rate": 100, "duration": 10})
    ids = list(range(1000))
    offsets = np.arange(1000) / 100.0
    labels = [routing(spec, ids, offsets).label_for(i) for i in ids]
    assert set(labels[:500]) == {"a"}
    assert 0.4 < labels[500:].count("b") / 500 < 0.6
    parted = routing(spec, ids[1::3], offsets[1::3])
    assert [parted.label_for(i) for i in ids[1::3]] == labels[1::3]


def test_entries_with_their_own_users_start_at_their_start() -> None:
    from qbench.run.load.mix import user_branches, user_starts
    from qbench.run.pipeline import check_schedule
    from qbench.run.scenario.schedule import UserPlan

    entries = [{"endpoint": {"api_name": "a"}, "payload": TEXT, "users": 2},
               {"endpoint": {"page": "/"}, "users": 3, "start": 4}]
    spec = scenario(mix=entries, load={"users": 5, "duration": 10, "ramp_up": 1})
    assert list(user_branches(spec)) == [0, 0, 1, 1, 1]  # type: ignore[arg-type]
    plan = check_schedule(spec)
    assert isinstance(plan, UserPlan)
    assert plan.start_offsets.tolist() == pytest.approx([0, 0.5, 4, 4 + 1 / 3, 4 + 2 / 3])
    plain = scenario(mix=[{**e, "users": None} for e in entries], load={"users": 5, "duration": 10})
    offsets = check_schedule(plain).start_offsets  # type: ignore[union-attr]
    assert user_starts(plain, offsets) is offsets  # no users per entry: the plan's own offsets
    route = routing(spec, None)
    rng = __import__("numpy").random.default_rng(0)
    assert [route.for_user(u, rng, 9.0) for u in range(5)] == ["a", "a", "page /", "page /", "page /"]
    drawn = scenario(mix=[{**e, "users": None} for e in entries], load={"users": 5, "duration": 10})
    route = routing(drawn, None)
    assert {route.for_user(0, rng, 1.0) for _ in range(50)} == {"a"}  # the page joins at 4 s
    assert {route.for_user(0, rng, 5.0) for _ in range(200)} == {"a", "page /"}


@pytest.mark.parametrize(
    ("entries", "load", "message"),
    [
        ([{"users": 2}, {}], {"users": 2}, r"key 'mix.1.users': value None: some entries have their own"),
        ([{"users": 2}, {"users": 3}], {"users": 4}, r"the entries' users add up to 5, but load.users is 4"),
        ([{"users": 2}, {"users": 3}], {"rate": 4}, r"add up to 5, but load is rate: .* load.users: 5"),
        ([{"start": 1}, {"start": 2}], {"rate": 4}, r"every entry starts after 0 s \(the first at 1 s\)"),
        ([{}, {"start": 12}], {"rate": 4}, r"key 'mix.1.start': value 12: not before the run's end \(load"),
    ],
)
def test_users_and_starts_of_a_mix_must_agree(entries: list[dict[str, Any]], load: dict[str, Any],
                                              message: str) -> None:
    raw = [{"endpoint": {"api_name": n}, "payload": TEXT, **e} for n, e in zip("ab", entries, strict=True)]
    with pytest.raises(ScenarioError, match=message):
        scenario(mix=raw, load={**load, "duration": 10})


def test_summary_per_endpoint_and_slo_applies_to_each_unless_overridden() -> None:
    records = []
    for i in range(40):
        label, service = ("a", 0.1) if i % 2 else ("b", 1.0)
        r = RequestRecord(request_id=i, user_id=i, session_id="", endpoint=label, warmup=False,
                          intended_at_s=i * 0.1, sent_at_s=i * 0.1, started_at_s=i * 0.1,
                          completed_at_s=i * 0.1 + service, outcome="ok")
        records.append(r)
    from qbench.run.scenario.schema import Slo

    slo = Slo(p95_latency_s=0.5, min_throughput=1.0)
    summary = summarize(records, slo, endpoint_slos={"a": None, "b": None})
    assert set(summary.endpoints) == {"a", "b"} and summary.endpoints["a"].requests == 20
    assert summary.endpoints["b"].phase("service_s").p50 == pytest.approx(1.0)
    assert summary.endpoints["a"].slo_passed and not summary.endpoints["b"].slo_passed
    assert not summary.slo_passed and [c.name for c in summary.slo] == ["min_throughput"]
    relaxed = summarize(records, slo, endpoint_slos={"a": None, "b": Slo(p95_latency_s=2.0)})
    assert relaxed.slo_passed
    stricter = summarize(records, Slo(p95_latency_s=2.0, error_rate=0.01),
                         endpoint_slos={"a": Slo(p95_latency_s=0.01)})
    assert [c.name for c in stricter.endpoints["a"].slo] == ["p95_latency_s", "error_rate"]  # merged
    assert not stricter.slo_passed and stricter.endpoints["b"].slo_passed
    again = type(summary).from_dict(json.loads(json.dumps(summary.to_dict())))
    assert again.endpoints["b"].phase("service_s").p50 == pytest.approx(1.0)


# ---------------------------------------------------------------- real runs


FUNCTIONS = [sleep_fn("a", 20, concurrency_limit=None), sleep_fn("b", 60, concurrency_limit=None),
             sleep_fn("c", 150, concurrency_limit=None)]


def test_open_loop_mix_on_the_reference_server(server_factory: Factory, tmp_path: Path) -> None:
    spec = mix_scenario({"rate": 40, "arrival": "poisson", "duration": 3, "timeout": 20})
    with server_factory(functions=FUNCTIONS) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
        replay = run_scenario(scenario(mix=spec.model_dump()["mix"], load={"replay": str(tmp_path / "run")}),
                              target=server.url, out_dir=tmp_path / "replay", live=False)
    records = result.records
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    counts = Counter(r.endpoint for r in records)
    n = len(records)
    assert counts["a"] > counts["c"] and abs(counts["a"] / n - 0.5) < 0.2 and counts["c"] >= 5
    ends = result.summary.endpoints
    assert {k: e.requests for k, e in ends.items()} == dict(counts)
    assert all(e.phase("service_s").count == counts[k] for k, e in ends.items())
    # each endpoint's own sleep, on the server's clock (a starved client can read process_starts and
    # process_completed in one read: a 20 ms service then reads 0 on its clock)
    service = {k: statistics.median(r.server_total_s or 0.0 for r in records if r.endpoint == k)
               for k in "abc"}
    assert 0.02 <= service["a"] < service["b"] < service["c"] and service["c"] / service["a"] > 3
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert set(summary["endpoints"]) == {"a", "b", "c"}
    by_id = {r.request_id: r.endpoint for r in records}
    assert {r.request_id: r.endpoint for r in replay.records} == by_id  # a replay sends the same endpoints
    check_outputs(result.run_dir, replay.run_dir, result.summary)


def check_outputs(run_dir: Path, other: Path, summary: Any) -> None:
    """The console, the report and compare show each endpoint beside the total."""
    console = Console(record=True, width=120)
    render_summary(summary, console)
    text = console.export_text()
    assert "Per endpoint" in text
    assert all(re.search(rf"^ *{label} +\d", text, re.M) for label in ("a", "b", "c", "all"))
    files = build_report(run_dir)
    markdown = files.markdown.read_text()
    assert "| endpoint | n | ok |" in markdown and "\n| c | " in markdown
    assert "<section id=\"endpoints\">" in files.html.read_text()
    comparison = compare(run_dir, other, parse_max_regression(["c:p95_service_s=900%"]))
    names = {d.name: d for d in comparison.deltas}
    assert {"a:p95_latency_s", "c:throughput_rps"} <= set(names) and names["c:p95_service_s"].threshold == 9


def test_closed_loop_users_pick_per_request(server_factory: Factory, tmp_path: Path) -> None:
    spec = mix_scenario({"users": 4, "requests": 60, "timeout": 20}, weights=(1, 1, 1))
    with server_factory(functions=FUNCTIONS) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    counts = Counter(r.endpoint for r in result.records)
    assert len(result.records) == 60 and set(counts) == {"a", "b", "c"} and min(counts.values()) >= 8
    per_user = {u: {r.endpoint for r in result.records if r.user_id == u} for u in range(4)}
    assert all(len(labels) >= 2 for labels in per_user.values())


def test_the_docs_mix_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/traffic-mixes-and-journeys.md: serve abc, run scenarios/mix.yaml twice (3 s), compare."""
    monkeypatch.chdir(ROOT)
    with serve_in_thread(load_preset("abc")) as server:
        for name in ("A", "B"):
            args = ["run", "scenarios/mix.yaml", "--target", server.url, "--out", str(tmp_path / name),
                    "--set", "load.duration=3", "--no-live"]
            out = CliRunner().invoke(app, args)
            assert out.exit_code in (0, 3), out.output  # 3: an SLO missed on a busy host
            assert "Per endpoint" in out.output
    args = ["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--max-regression", "c:p95_latency_s=20%"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code in (0, 3) and "c:p95_latency_s" in out.output, out.output


def test_burst_stages_and_processes_send_the_same_mix(server_factory: Factory, tmp_path: Path) -> None:
    """Every open-loop shape routes by request id: two generator processes send what one sends."""
    fast = [sleep_fn(n, 5, concurrency_limit=None) for n in "abc"]
    with server_factory(functions=fast) as server:
        runs = {name: run_scenario(mix_scenario(load), target=server.url, out_dir=tmp_path / name, live=False)
                for name, load in (("one", {"rate": 30, "duration": 1.5}),
                                   ("two", {"rate": 30, "duration": 1.5, "processes": 2}),
                                   ("burst", {"burst": 20}),
                                   ("stages", {"stages": [{"duration": 1.5, "rate": 5, "to": 25}]}))}
    for result in runs.values():
        assert all(r.ok for r in result.records) and set(result.summary.endpoints) == {"a", "b", "c"}
    one, two = ({r.request_id: r.endpoint for r in runs[k].records} for k in ("one", "two"))
    assert one == two


def test_a_trace_naming_several_endpoints_runs_as_a_mix(server_factory: Factory, tmp_path: Path) -> None:
    """As a HAR of a Blocks app: lines name their function (api_name or fn_index) and carry inputs."""
    names = ["a", "b", "a", "c", "a", "b"] * 3
    lines = [{"t_s": i * 0.05, **({"fn_index": 2} if n == "c" else {"api_name": n}), "inputs": [f"hi {i}"]}
             for i, n in enumerate(names)]
    trace = tmp_path / "har.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    spec = scenario(endpoint={"api_name": "a"}, load={"trace": str(trace), "timeout": 20})
    with server_factory(functions=FUNCTIONS) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records if not r.ok][:3]
    sent = [r.endpoint for r in sorted(result.records, key=lambda r: r.request_id)]
    assert sent == [n if n != "c" else "fn_index=2" for n in names]  # each line to its own function
    info = json.loads((result.run_dir / "run.json").read_text())
    assert [e["weight"] for e in info["scenario"]["mix"]] == [9, 6, 3]
    assert result.summary.endpoints["fn_index=2"].phase("service_s").p50 > 0.1  # c's 150 ms
