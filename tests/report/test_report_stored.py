"""A finished run's report reads what the run wrote (summary.json's summary, diagnosis, app notes,
before/after comparisons) and equals, field for field and chart for chart, the report recomputed from
its records: over generated runs of every shape (errors, warm-up, several endpoints, streams, token
runs, server phases, journeys, an entry that starts later) and the real GPU runs in tests/run/fixtures."""

from __future__ import annotations

import shutil
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qbench import __version__
from qbench.report import build
from qbench.report.build import diagnosis, run_context, run_headline
from qbench.report.rundir import read_run
from qbench.run import pipeline
from qbench.run.records.schema import RequestRecord, write_parquet
from qbench.run.results.files import Writer
from qbench.run.results.run_info import RunInfo
from qbench.run.results.summary import GeneratorStats
from qbench.run.scenario.schema import parse_scenario
from tests.report.report_synth import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from end_of_run import chunk_records, scenario  # noqa: E402  (the benchmark's realistic Gradio records)

FIXTURES = Path(__file__).resolve().parents[1] / "run" / "fixtures" / "gpu-2026-11-26"
SERVER = {"version": "6.31.0", "protocol": "sse_v3", "status": None, "status_end": None}


def finished(folder: Path, records: list[RequestRecord], raw: dict[str, Any]) -> Path:
    """A run folder as the runner leaves it: records.parquet (the spill's seal, as write_parquet writes
    it), then its own _finish writes run.json and summary.json."""
    folder.mkdir(parents=True)
    plan = parse_scenario(raw)
    info = RunInfo.start(scenario=plan.model_dump(mode="json", by_alias=True), target="http://127.0.0.1:7860",
                         qbench_version=__version__, host={"hostname": "t", "cpus": 2},
                         started_at="2026-11-27T12:00:00+00:00")
    stats = GeneratorStats(cpu_s=9.0, cpu_percent=25.0, max_loop_lag_s=0.004, p99_loop_lag_s=0.001,
                           max_in_flight=12)
    write_parquet(records, folder / "records.parquet")
    pipeline._finish(plan, folder, records, stats, replace(info, server=dict(SERVER)), Writer())
    return folder


def gradio_mix(n: int = 1200, seed: int = 7) -> list[RequestRecord]:
    rows, _ = chunk_records(np.random.default_rng(seed), 0, n, 0.0, 1000.0, 1.0, 0.3)
    return rows


def tokens_and_phases() -> list[RequestRecord]:
    rows = gradio_mix(800, seed=3)
    for k, r in enumerate(rows):
        if r.ok and r.endpoint == "chat":
            r.output_tokens, r.input_tokens = k % 40, 12
        if r.ok and k % 3:
            r.server_total_s = (r.completed_at_s or 0.0) - (r.started_at_s or 0.0)
            r.server_queue_wait_s, r.server_fn_s = 0.001 * (k % 5), r.server_total_s * 0.7
            r.server_preprocess_s = None if k % 7 == 0 else 0.002
    return rows


def journeys() -> list[RequestRecord]:
    out = []
    for j in range(60):
        for step in range(5):
            i = j * 5 + step
            t = j * 0.5 + step * 0.1
            ok = i % 23 != 0
            out.append(RequestRecord(
                request_id=i, user_id=j % 8, session_id=f"s{j}", endpoint="upload" if step == 0 else "chat",
                warmup=j < 4, intended_at_s=t, sent_at_s=t + 0.001, started_at_s=t + 0.01,
                completed_at_s=t + 0.05 + 0.001 * (i % 9), outcome="ok" if ok else "error",
                error_kind=None if ok else "server_error", error_message=None if ok else "boom",
                journey_id=j, step=step))
    return out


def late_entry() -> list[RequestRecord]:
    out = []
    for i in range(300):
        label, at = ("chat", i / 10) if i < 200 else ("page", 10 + (i - 200) / 5)
        slow = 1.5 if label == "chat" and at >= 10 else 1.0
        out.append(RequestRecord(request_id=i, user_id=0, session_id="", endpoint=label, warmup=False,
                                 intended_at_s=at, sent_at_s=at, started_at_s=at + 0.1 * slow,
                                 completed_at_s=at + 0.2 * slow, outcome="ok"))
    return out


TEXT = {"inputs": [{"text": {"words": [2, 8]}}]}
SIMPLE = {"name": "simple", "target": "http://127.0.0.1:7860", "protocol": "gradio",
          "endpoint": {"api_name": "predict"}, "payload": TEXT,
          "load": {"rate": 20, "duration": 20, "warmup": 1},
          "slo": {"p95_latency_s": 0.5, "error_rate": 0.01}}
JOURNEY = {"name": "journey", "target": "http://127.0.0.1:7860", "protocol": "gradio",
           "journey": [{"endpoint": {"api_name": "upload"}, "payload": TEXT},
                       {"endpoint": {"api_name": "chat"}, "payload": TEXT, "repeat": 4}],
           "load": {"users": 8, "duration": 30}, "slo": {"p95_latency_s": 2.0}}
LATE = {"name": "late", "target": "http://127.0.0.1:7860", "protocol": "gradio",
        "mix": [{"weight": 2, "endpoint": {"api_name": "chat"}, "payload": TEXT},
                {"weight": 1, "endpoint": {"api_name": "page"}, "payload": TEXT, "start": 10}],
        "load": {"rate": 10, "duration": 30}}

RUNS = {
    "gradio mix: errors, warm-up, streams": (gradio_mix, scenario(1200, 1000.0, "mix")),
    "tokens and server phases": (tokens_and_phases, scenario(800, 1000.0, "tokens")),
    "one endpoint, queue full and failures": (
        lambda: simulate(n=400, rate_rps=30, workers=2, max_queue=3, fail_every=17), SIMPLE),
    "journeys": (journeys, JOURNEY),
    "an entry that starts later": (late_entry, LATE),
}


def same_reports(run_dir: Path, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report context of `run_dir` from summary.json and recomputed, charts' PNG bytes included."""
    contexts = []
    for how in ("stored", "recomputed"):
        context = run_context(read_run(run_dir, recompute=how == "recomputed"), out / how)
        data = asdict(context)
        data.pop("generated")
        data["charts"] = {c.name: c.path.read_bytes() for c in context.charts}
        contexts.append(data)
    return contexts[0], contexts[1]


@pytest.mark.parametrize("name", list(RUNS))
def test_the_report_from_summary_json_is_the_recomputed_report(name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    make, raw = RUNS[name]
    if name not in ("gradio mix: errors, warm-up, streams", "tokens and server phases"):  # charts: twice
        monkeypatch.setattr(build, "render_run_charts", lambda *args: [])
    folder = finished(tmp_path / "run", make(), raw)
    loaded = read_run(folder)
    assert loaded._records is None, "a finished run's report reads no record objects"
    assert loaded.stored.diagnosis is not None and loaded.stored.app_notes is not None
    recomputed = read_run(folder, recompute=True)
    assert loaded.summary.to_dict() == recomputed.summary.to_dict()
    stored, again = same_reports(folder, tmp_path / "out")
    assert stored.keys() == again.keys()
    for key in stored:
        assert stored[key] == again[key], key
    if name == "an entry that starts later":
        assert stored["alongside"] and "joined at 10 s" in stored["alongside"][0]
    if name == "journeys":
        assert stored["steps"]


@pytest.mark.parametrize("point", ["image-b8-cl1-bf16", "image-b32-cl1-bf16"])
def test_a_real_runs_summary_json_is_its_records_summary(point: str, tmp_path: Path) -> None:
    folder = tmp_path / point
    shutil.copytree(FIXTURES / point, folder)
    loaded, recomputed = read_run(folder), read_run(folder, recompute=True)
    assert loaded.notes == recomputed.notes == []
    assert loaded.summary.to_dict() == recomputed.summary.to_dict()
    # a summary.json from before the device figures: the GPU's busy share from run.json's /status (the
    # README's 5% and 4%; these records keep no forward phase)
    device = loaded.summary.device
    assert device is not None and device.forward_rps is None and device.gpu_busy is not None
    busy = {"image-b8-cl1-bf16": "5%", "image-b32-cl1-bf16": "4%"}[point]
    assert f"{device.gpu_busy[0]:.0%}" == busy
    assert ("device", f"GPU busy {busy}") in run_headline(loaded)  # the report's headline table
    assert loaded.stored.diagnosis, "the diagnosis the run wrote is the report's"
    assert diagnosis(loaded) == loaded.stored.diagnosis


def test_a_summary_json_that_does_not_count_the_records_is_recomputed(tmp_path: Path) -> None:
    folder = finished(tmp_path / "run", simulate(n=120, warmup=10), SIMPLE)
    text = (folder / "summary.json").read_text()
    (folder / "summary.json").write_text(text.replace('"requests": 110', '"requests": 999', 1))
    loaded = read_run(folder)
    assert loaded.summary.requests == 110
    assert loaded._records is None  # recomputed from the columns, no record object read
    assert loaded.notes == ["summary.json counts 999 measured requests, the records 110: recomputed from "
                            "the records"]
    assert loaded.stored.diagnosis is None


def test_an_older_summary_json_without_a_diagnosis_gets_one_from_the_records(tmp_path: Path) -> None:
    import json

    folder = finished(tmp_path / "run", simulate(n=200, warmup=10, max_queue=2), SIMPLE)
    data = json.loads((folder / "summary.json").read_text())
    want = data.pop("diagnosis")
    data.pop("app_notes")
    (folder / "summary.json").write_text(json.dumps(data))
    loaded = read_run(folder)
    assert loaded.stored.diagnosis is None and loaded.stored.app_notes is None
    assert [f.to_dict() for f in diagnosis(loaded)] == want
