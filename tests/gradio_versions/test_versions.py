"""qbench against real Gradio releases (3.x ws, 4.x sse*, 5.x sse_v3 under /gradio_api), each served
from its own env by tests/gradio_versions/app.py: every phase recorded, generators, server errors,
queue_full, timeouts that cancel, uploads, session pools, and a wrong protocol stopping early."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.schema import parse_scenario

from .conftest import Release

PHASES = ("joined_at_s", "estimation_at_s", "started_at_s", "completed_at_s")
TEXT = [{"value": "hi"}]


def family(version: str) -> str:
    major, minor = (int(x) for x in version.split(".")[:2])
    if major == 3:
        return "ws"
    if major == 4:
        for last, name in ((8, "sse"), (16, "sse_v1"), (20, "sse_v2"), (21, "sse_v2.1")):
            if minor <= last:
                return name
    return "sse_v3"


def run(target: str, tmp_path: Path, api_name: str, load: dict[str, Any], inputs: Any = TEXT,
        **extra: Any) -> RunResult:
    raw = {"name": api_name, "endpoint": {"api_name": api_name}, "payload": {"inputs": inputs},
           "load": {"timeout": 30, **load}, **extra}
    return run_scenario(parse_scenario(raw), target=target, out_dir=tmp_path / api_name, live=False)


def kinds(records: list[RequestRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[r.error_kind or "ok"] = out.get(r.error_kind or "ok", 0) + 1
    return out


def test_healthy_endpoint_records_every_phase(release: Release, tmp_path: Path) -> None:
    result = run(release.url, tmp_path, "echo", {"burst": 6})
    assert kinds(result.records) == {"ok": 6}, [r.error_message for r in result.records]
    for r in result.records:
        assert all(getattr(r, p) is not None for p in PHASES), r
        assert r.rank is not None and r.server_duration_s is not None
    gradio = result.run_info.server["gradio"]
    assert gradio["version"] == release.version and gradio["protocol"] == family(release.version)
    assert gradio["api_prefix"] == ("/gradio_api" if release.version >= "5" else "")
    assert result.run_info.failed_opening is None


def test_generator_outputs_and_batches(release: Release, tmp_path: Path) -> None:
    result = run(release.url, tmp_path, "stream", {"burst": 3})
    assert kinds(result.records) == {"ok": 3}
    assert all(r.outputs == 4 and r.first_output_at_s is not None for r in result.records)
    if release.version != "4.8.0":  # 4.8.0's batching kills its queue (ValueError in get_events_in_batch)
        assert kinds(run(release.url, tmp_path, "batch", {"burst": 4}).records) == {"ok": 4}


def test_failing_function_is_server_error(release: Release, tmp_path: Path) -> None:
    result = run(release.url, tmp_path, "fail", {"burst": 3})
    assert kinds(result.records) == {"server_error": 3}
    assert all(r.started_at_s is not None for r in result.records)
    assert result.summary.error_samples["server_error"]
    assert result.run_info.failed_opening is None  # the function ran: a result, not a misconfiguration


def test_full_queue_is_queue_full(release: Release, tmp_path: Path) -> None:
    result = run(release.tight_url, tmp_path, "sleep", {"burst": 5})
    counts = kinds(result.records)
    assert counts.get("ok", 0) >= 1 and counts.get("queue_full", 0) >= 1, counts
    assert set(counts) == {"ok", "queue_full"}


def test_timeout_cancels_the_job_on_the_server(release: Release, tmp_path: Path) -> None:
    """`long` (10 s, one at a time) twice, 1 s apart, 1.5 s timeout: the second one can only start
    if the first one's cancel freed the worker."""
    result = run(release.url, tmp_path, "long", {"rate": 1, "requests": 2, "timeout": 1.5})
    first, second = result.records
    assert first.error_kind == "timeout" and first.started_at_s is not None
    assert second.started_at_s is not None, "the timed-out job kept the worker: no cancel"


def test_image_upload_and_session_pool(release: Release, tmp_path: Path) -> None:
    image = [{"image": {"width": 32, "height": 24}}]
    assert kinds(run(release.url, tmp_path, "image", {"burst": 2}, image).records) == {"ok": 2}
    pooled = run(release.url, tmp_path, "echo", {"users": 2, "requests": 6, "sessions": 1})
    assert kinds(pooled.records) == {"ok": 6}
    assert len({r.session_id for r in pooled.records}) == 1


def test_wrong_protocol_stops_early_and_says_why(release: Release, tmp_path: Path) -> None:
    wrong = "sse_v3" if family(release.version) == "ws" else "ws"
    result = run(release.url, tmp_path, "echo", {"rate": 20, "duration": 10}, gradio_protocol=wrong)
    verdict = result.run_info.failed_opening
    assert verdict and "likely cause" in verdict and "/queue/join" in verdict
    assert result.summary.sent < 100 and len(result.records) == 200
