"""The opening guard: a run whose first requests all fail the same way stops and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import RequestRecord
from qbench.run.results.failfast import OpeningGuard, describe
from tests.run.conftest import scenario


def record(i: int, kind: str | None, status: int | None = None, message: str = "boom") -> RequestRecord:
    r = RequestRecord(i, 0, "", "e", False, float(i), sent_at_s=float(i), completed_at_s=float(i) + 0.1)
    if kind is None:
        r.outcome = "ok"
    else:
        r.error_kind, r.http_status, r.error_message = kind, status, message
    return r


@pytest.mark.parametrize(
    ("kinds", "verdict"),
    [
        (["http_4xx"] * 5, True),
        (["http_4xx"] * 4 + [None], False),  # one success: the endpoint works
        (["http_4xx"] * 4 + ["http_5xx"], False),  # mixed kinds: not one cause
        (["server_error"] * 5, False),  # the function ran and failed: a result, not a misconfiguration
        (["queue_full"] * 5, False),
        (["connect"] * 5, True),
    ],
)
def test_guard_judges_a_full_opening(kinds: list[str | None], verdict: bool) -> None:
    guard = OpeningGuard(requests=5)
    results = [guard.observe(record(i, k, 404)) for i, k in enumerate(kinds)]
    assert (results[-1] is not None) is verdict
    assert all(r is None for r in results[:-1])


def test_guard_shrinks_the_opening_to_what_the_window_sent() -> None:
    guard = OpeningGuard(requests=20, window_s=3.0)
    assert guard.observe(record(0, "http_4xx", 404)) is None
    assert guard.tick(1.0, sent=2) is None  # inside the window: wait for more
    assert guard.observe(record(1, "http_4xx", 404)) is None
    assert guard.tick(3.5, sent=2) is not None  # past the window: the 2 sent by then are the opening


def test_guard_judges_a_short_run_at_its_end() -> None:
    guard = OpeningGuard(requests=20)
    for i in range(3):
        guard.observe(record(i, "http_5xx", 500))
    assert guard.verdict is None
    assert guard.finish(sent=3) is not None and guard.verdict is not None


@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [
        (404, "POST http://h/gradio_api/queue/join: HTTP 404: Not Found", "wrong prefix"),
        (401, "POST http://h/queue/join: HTTP 401: Not authenticated", "set auth.login"),
        (403, "GET http://h/config: HTTP 403: Forbidden", "set auth.bearer"),
        (422, "POST http://h/queue/join: HTTP 422: {...}", "api_name"),
        (403, "GET ws://h/queue/join (websocket): HTTP 403: Invalid response status", "only Gradio 3.x"),
    ],
)
def test_describe_names_url_status_and_likely_cause(status: int, message: str, hint: str) -> None:
    text = describe([record(i, "http_4xx", status, message) for i in range(20)])
    assert text.startswith("the first 20 requests all failed with http_4xx: ")
    assert message in text and hint in text


def test_run_stops_early_and_still_writes_every_record(http_echo: str, tmp_path: Path) -> None:
    spec = scenario(protocol="http", endpoint={"path": "/fail"}, load={"rate": 40, "duration": 10})
    result = run_scenario(spec, target=http_echo, out_dir=tmp_path / "r", live=False)
    verdict = result.run_info.failed_opening
    assert verdict and "http_5xx" in verdict and f"POST {http_echo}/fail: HTTP 500" in verdict
    assert "check its log" in verdict
    assert len(result.records) == 400  # every scheduled request has a record
    assert result.summary.sent < 100  # stopped long before the 10 s were up
    kinds = result.summary.errors_by_kind  # the unsent, and a request still in flight at the stop
    assert kinds["interrupted"] + kinds["http_5xx"] == 400
    assert kinds["interrupted"] >= 400 - result.summary.sent
    assert "HTTP 500" in result.summary.error_samples["http_5xx"]
    assert (tmp_path / "r" / "records.parquet").exists()


def test_cli_exits_2_with_the_verdict_and_shows_a_sample_per_kind(http_echo: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from qbench.cli import app

    path = tmp_path / "fail.yaml"
    path.write_text("protocol: http\nendpoint: {path: /fail}\nload: {burst: 3}\n")
    args = ["run", str(path), "--target", http_echo, "--no-live", "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "run failed: the first 3 requests all failed with http_5xx" in output  # nothing left to stop
    assert "sample message" in result.output
