"""Streamed inputs (`.stream()` events) against a real microphone app on each release that has them:
the main env's Gradio (6.x) and 5.50.0 (tests/gradio_versions/stream_app.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.scenario.schema import parse_scenario

from .envs import EnvError, ensure_env
from .servers import MAIN, serve_releases

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("stream_app.py")
AUDIO = {"inputs": [{"audio": {"seconds": 0.2, "sample_rate": 16000}}]}


@pytest.fixture(scope="module", params=(MAIN, "5.50.0"))
def stream_app(request: pytest.FixtureRequest) -> Iterator[str]:
    version = str(request.param)
    if version != MAIN:
        try:
            ensure_env(version)
        except EnvError as exc:
            pytest.skip(f"gradio {version}: its env could not be built: {exc}")
    with serve_releases([(version, {})], app=APP) as (url,):
        yield url


def run(url: str, tmp_path: Path, api_name: str, chunks: int, users: int, requests: int) -> RunResult:
    spec = parse_scenario({"name": api_name, "target": url, "payload": AUDIO,
                           "endpoint": {"api_name": api_name, "chunks": chunks},
                           "load": {"users": users, "requests": requests, "warmup": 0, "timeout": 30}})
    return run_scenario(spec, out_dir=tmp_path / "run", live=False)


def test_two_concurrent_streams_get_every_chunk_answered(stream_app: str, tmp_path: Path) -> None:
    # the two streams, one per user, sent at once (8 chunks of 0.2 s each)
    result = run(stream_app, tmp_path, "level", chunks=8, users=2, requests=2)
    assert result.summary.errors == 0 and result.summary.completed_ok >= 2
    for r in result.records:
        assert r.chunks_sent == 8 and r.chunks_answered >= 2 and r.outputs >= 2
        assert r.chunk_latency_count > 0 and r.chunk_latency_p95_s is not None
    assert result.summary.phase("chunk_latency_s").count > 0


def test_the_apps_time_limit_ends_a_stream_without_an_error(stream_app: str, tmp_path: Path) -> None:
    """The chunks after the time limit find no event: 404 on 6.x, 500 on 5.x; neither is an error."""
    result = run(stream_app, tmp_path, "short", chunks=20, users=1, requests=1)  # a 1 s run sent 1
    assert result.summary.errors == 0 and result.records
    assert all(r.ok and r.chunks_sent < 20 for r in result.records)
