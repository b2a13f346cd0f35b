"""`qbench trace import` (nginx, uvicorn, HAR, Mooncake) and `qbench trace show`, on small samples
written in the real formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.load.mix import with_trace_mix
from qbench.run.scenario.schedule import OpenPlan, plan
from qbench.run.scenario.schema import parse_scenario
from qbench.run.scenario.trace import read_trace
from qbench.run.scenario.trace_formats import import_trace, sparkline, trace_shape

NGINX = """\
127.0.0.1 - - [23/Nov/2026:10:15:00 +0000] "POST /predict HTTP/1.1" 200 612 "-" "python-httpx/0.28" 0.250
127.0.0.1 - - [23/Nov/2026:10:15:00 +0000] "POST /predict HTTP/1.1" 200 612 "-" "python-httpx/0.28" 0.010
10.0.0.7 - alice [23/Nov/2026:10:15:02 +0000] "GET /health HTTP/1.1" 200 2
127.0.0.1 - - [23/Nov/2026:10:15:03 +0000] "POST /predict HTTP/1.1" 503 31 "-" "curl/8.5" 0.001
"""

UVICORN = """\
2026-11-23 10:15:00,000 INFO:     Started server process [4242]
2026-11-23 10:15:01,250 INFO:     127.0.0.1:52345 - "POST /predict HTTP/1.1" 200 OK
2026-11-23 10:15:01,750 INFO:     127.0.0.1:52346 - "POST /predict HTTP/1.1" 200 OK
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_nginx_times_are_send_times_spread_within_their_second(tmp_path: Path) -> None:
    lines = import_trace(write(tmp_path, "access.log", NGINX), "nginx", include="^/predict$")
    assert [line["path"] for line in lines] == ["/predict"] * 3
    first = lines[0]["timestamp"]
    offsets = [round(line["timestamp"] - first, 3) for line in lines]
    # 10:15:00 - 0.250 s lands in 10:14:59; the 0.010 s one in 10:14:59 too: both spread over that second
    assert offsets[0] == 0 and 0 < offsets[1] < 1 and offsets[2] > 3
    unspread = import_trace(write(tmp_path, "a2.log", NGINX), "nginx", spread=False, include="/predict")
    assert unspread[0]["timestamp"] == pytest.approx(1795428899.75)
    assert unspread[1]["timestamp"] == pytest.approx(1795428899.99)


def test_uvicorn_needs_a_time_prefix(tmp_path: Path) -> None:
    lines = import_trace(write(tmp_path, "uv.log", UVICORN), "uvicorn")
    assert [round(line["timestamp"] % 60, 3) for line in lines] == [1.25, 1.75]
    bare = 'INFO:     127.0.0.1:52345 - "POST /predict HTTP/1.1" 200 OK\n'
    with pytest.raises(ScenarioError, match=r"uv2.log:1: .*default log has no time.*asctime"):
        import_trace(write(tmp_path, "uv2.log", bare), "uvicorn")


def har(entries: list[dict[str, object]]) -> str:
    return json.dumps({"log": {"version": "1.2", "entries": entries}})


def test_a_gradio_har_keeps_fn_index_and_inputs_of_each_join(tmp_path: Path) -> None:
    def join(when: str, data: object) -> dict[str, object]:
        body = {"data": data, "fn_index": 2, "session_hash": "abc", "event_data": None, "trigger_id": 9}
        return {"startedDateTime": when, "request": {"method": "POST",
                "url": "http://127.0.0.1:7860/gradio_api/queue/join?",
                "postData": {"mimeType": "application/json", "text": json.dumps(body)}}}

    entries = [
        {"startedDateTime": "2026-11-23T10:15:00.000Z",
         "request": {"method": "GET", "url": "http://127.0.0.1:7860/config"}},
        join("2026-11-23T10:15:01.500Z", ["a cat on a mat"]),
        join("2026-11-23T10:15:02.000Z", [{"path": "/tmp/x.png", "meta": {"_type": "gradio.FileData"}}]),
    ]
    path = write(tmp_path, "session.har", har(entries))
    lines = import_trace(path, "har", include="/queue/join$")
    assert [line.get("fn_index") for line in lines] == [2, 2]
    assert lines[0]["inputs"] == ["a cat on a mat"] and "inputs" not in lines[1]  # an upload cannot replay
    out = tmp_path / "trace.jsonl"
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    scenario = parse_scenario({"endpoint": {"fn_index": 2}, "load": {"trace": str(out)}})
    assert with_trace_mix(scenario) is scenario  # the Gradio route path is not the endpoint: no mix
    built = plan(scenario.load)
    assert isinstance(built, OpenPlan) and built.offsets.tolist() == [0.0, 0.5]
    with pytest.raises(ScenarioError, match="not a HAR file"):
        import_trace(write(tmp_path, "bad.har", "{}"), "har")


def test_mooncake_timestamps_are_milliseconds_and_lengths_become_tokens(tmp_path: Path) -> None:
    text = ('{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1]}\n'
            '{"timestamp": 3052, "input_length": 7319, "output_length": 490, "hash_ids": [2]}\n')
    lines = import_trace(write(tmp_path, "mooncake.jsonl", text), "mooncake")
    assert lines == [{"t_s": 0.0, "input_tokens": 6755, "output_tokens": 500},
                     {"t_s": 3.052, "input_tokens": 7319, "output_tokens": 490}]


def test_unreadable_lines_and_formats_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"x.log:1: not an nginx"):
        import_trace(write(tmp_path, "x.log", "hello\n"), "nginx")
    with pytest.raises(ScenarioError, match="expected one of nginx, uvicorn, har, mooncake"):
        import_trace(write(tmp_path, "y.log", NGINX), "apache")
    with pytest.raises(ScenarioError, match="no requests found as nginx matching '/nope'"):
        import_trace(write(tmp_path, "z.log", NGINX), "nginx", include="/nope")


def test_cli_import_then_show(tmp_path: Path) -> None:
    runner = CliRunner()
    log = write(tmp_path, "access.log", NGINX)
    out = tmp_path / "t.jsonl"
    done = runner.invoke(app, ["trace", "import", str(log), "--format", "nginx", "-o", str(out),
                               "--include", "^/predict$"])
    assert done.exit_code == 0, done.output
    assert "wrote 3 requests" in done.output and len(out.read_text().splitlines()) == 3
    shown = runner.invoke(app, ["trace", "show", str(out)], env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.output
    assert "3 requests over" in shown.output and "path /predict" in shown.output
    bad = runner.invoke(app, ["trace", "import", str(log), "--format", "apache", "-o", str(out)])
    assert bad.exit_code == 2 and "expected one of" in bad.output


def test_shape_and_sparkline() -> None:
    trace = read_trace(Path(__file__).resolve().parents[3] / "scenarios" / "traffic.jsonl")
    shape = trace_shape(trace)
    assert shape.requests == 92 and shape.with_inputs == 12 and shape.peak_rps_1s >= 12
    assert shape.endpoints == {"api_name predict": 92}
    assert sparkline(shape.per_second, width=10).strip() and len(sparkline(shape.per_second, width=10)) == 10


def test_the_readme_trace_commands(tmp_path: Path) -> None:
    """The README's `trace import ... --format har` and `trace show scenarios/traffic.jsonl`, as written."""
    body = json.dumps({"data": ["hi"], "fn_index": 0, "session_hash": "s"})
    entry = {"startedDateTime": "2026-11-23T10:15:01Z", "request": {
        "method": "POST", "url": "http://h/gradio_api/queue/join", "postData": {"text": body}}}
    later = {**entry, "startedDateTime": "2026-11-23T10:15:02Z"}
    har_file = write(tmp_path, "session.har", har([entry, later]))
    runner = CliRunner()
    out = tmp_path / "traffic.jsonl"
    done = runner.invoke(app, ["trace", "import", str(har_file), "--format", "har", "-o", str(out),
                               "--include", "/queue/join$"])
    assert done.exit_code == 0 and "wrote 2 requests" in done.output, done.output
    shipped = Path(__file__).resolve().parents[3] / "scenarios" / "traffic.jsonl"
    shown = runner.invoke(app, ["trace", "show", str(shipped)], env={"COLUMNS": "120"})
    assert shown.exit_code == 0 and "92 requests over" in shown.output and "api_name predict" in shown.output
