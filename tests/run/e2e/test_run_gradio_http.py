"""End-to-end runs against a real Gradio app (uploads, generators) and a plain HTTP JSON server."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.errors import TargetError
from qbench.run.pipeline import run_scenario
from tests.run.conftest import scenario


def test_real_gradio_text_rate(gradio_app: str, tmp_path: Path) -> None:
    spec = scenario(
        endpoint={"api_name": "greet"},
        payload={"inputs": [{"text": {"words": [1, 3]}}]},
        load={"rate": 20, "duration": 1, "timeout": 10},
    )
    result = run_scenario(spec, target=gradio_app, out_dir=tmp_path / "r", live=False)
    assert len(result.records) == 20 and all(r.ok for r in result.records)
    r = result.records[0]
    assert r.rank == 0 and r.server_duration_s is not None and r.server_duration_s >= 0.02
    # client-observed phases: process_starts and process_completed may arrive in one read on a busy host
    assert r.queue_wait_s is not None and r.service_s is not None and r.service_s >= 0


def test_real_gradio_image_upload_and_generator(gradio_app: str, tmp_path: Path) -> None:
    image = scenario(
        endpoint={"api_name": "size"},
        payload={"inputs": [{"image": {"width": 64, "height": 48, "format": "jpeg"}}]},
        load={"burst": 5, "timeout": 20},
    )
    result = run_scenario(image, target=gradio_app, out_dir=tmp_path / "img", live=False)
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]
    assert all(r.bytes_sent > 500 for r in result.records)  # the upload is counted
    stream = scenario(
        endpoint={"api_name": "count"},
        payload={"inputs": [{"value": "abcd"}]},
        load={"users": 2, "requests": 6, "sessions": 1},
    )
    result = run_scenario(stream, target=gradio_app, out_dir=tmp_path / "gen", live=False)
    assert len(result.records) == 6 and all(r.ok for r in result.records)
    assert all(r.outputs == 4 and r.ttfo_s is not None for r in result.records)
    assert result.summary.phase("ttfo_s").count == 6


def test_unknown_api_name_fails_before_any_request(gradio_app: str, tmp_path: Path) -> None:
    spec = scenario(endpoint={"api_name": "nope"}, payload={"inputs": [{"value": 1}]}, load={"burst": 1})
    with pytest.raises(TargetError, match="no endpoint 'nope'.*greet"):
        run_scenario(spec, target=gradio_app, out_dir=tmp_path / "r", live=False)
    wrong_inputs = scenario(endpoint={"api_name": "greet"}, load={"burst": 1})
    with pytest.raises(TargetError, match="takes 1 input"):
        run_scenario(wrong_inputs, target=gradio_app, out_dir=tmp_path / "r2", live=False)


def test_unreachable_target_is_a_target_error(tmp_path: Path) -> None:
    spec = scenario(endpoint={"api_name": "x"}, load={"burst": 1})
    with pytest.raises(TargetError, match="cannot connect"):
        run_scenario(spec, target="http://127.0.0.1:9", out_dir=tmp_path / "r", live=False)


def test_http_protocol_open_and_closed_loop(http_echo: str, tmp_path: Path) -> None:
    spec = scenario(
        protocol="http",
        endpoint={"path": "/echo", "body": {"prompt": "$0", "n": 1}},
        payload={"inputs": [{"text": {"words": [2, 4]}}]},
        load={"rate": 50, "duration": 1},
    )
    result = run_scenario(spec, target=http_echo, out_dir=tmp_path / "open", live=False)
    assert len(result.records) == 50 and all(r.ok and r.http_status == 200 for r in result.records)
    assert all(r.bytes_received == r.bytes_sent > 10 for r in result.records)  # echoed body
    assert result.records[0].endpoint == "POST /echo" and result.records[0].queue_wait_s is None
    closed = scenario(
        protocol="http", endpoint={"path": "/slow", "method": "GET"}, load={"users": 2, "duration": 1.2}
    )
    result = run_scenario(closed, target=http_echo, out_dir=tmp_path / "closed", live=False)
    assert 2 <= len(result.records) <= 8 and all(r.ok for r in result.records)
    assert 0.45 < result.summary.phase("latency_s").p50 < 2.0  # type: ignore[operator]


def test_http_errors_and_timeouts_are_kinds(http_echo: str, tmp_path: Path) -> None:
    fail = scenario(protocol="http", endpoint={"path": "/fail"}, load={"burst": 3})
    result = run_scenario(fail, target=http_echo, out_dir=tmp_path / "f", live=False)
    assert result.summary.errors_by_kind == {"http_5xx": 3}
    slow = scenario(
        protocol="http", endpoint={"path": "/slow", "method": "GET"}, load={"burst": 2, "timeout": 0.1}
    )
    result = run_scenario(slow, target=http_echo, out_dir=tmp_path / "s", live=False)
    assert result.summary.errors_by_kind == {"timeout": 2}


def test_http_body_template_errors_fail_before_any_request(http_echo: str, tmp_path: Path) -> None:
    spec = scenario(
        protocol="http",
        endpoint={"path": "/echo", "body": {"x": "$3"}},
        payload={"inputs": [{"value": 1}]},
        load={"burst": 1},
    )
    with pytest.raises(TargetError, match=r"'\$3' but the payload has 1 input"):
        run_scenario(spec, target=http_echo, out_dir=tmp_path / "r", live=False)
    assert not (tmp_path / "r").exists()
