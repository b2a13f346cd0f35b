"""End to end on real Gradio apps (the installed release, >= 6.10) started the way `qbench sweep --app`
starts them (qbench.tune.servers.app_process, which sets GRADIO_PROFILING=1): a scenario from `qbench init`, a
short run, and every record carries Gradio's own phases; summary.json and the report say where the
time went."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.report.build import build_report
from qbench.run.pipeline import RunResult, load_scenario, run_scenario
from qbench.run.protocols.gradio_wire import parse_version
from qbench.tune.servers.app_process import knob_env, launch_command

try:  # the installed release's metadata: importing gradio costs each collecting worker ~6 s of CPU
    GRADIO = version("gradio")
except PackageNotFoundError:
    pytest.skip("Gradio is not installed", allow_module_level=True)
if parse_version(GRADIO) < (6, 10):
    pytest.skip(f"Gradio {GRADIO} keeps no per-event traces (6.10 and later do)", allow_module_level=True)

APP = Path(__file__).resolve().parents[1].joinpath("phases_app.py")
SHORT = {"load.duration": 2, "load.warmup": 0, "load.think_time": 0, "load.users": 2, "load.ramp_up": 0}


def launched(kind: str, tmp: Path) -> Iterator[str]:
    with launch_command(f"{sys.executable} {APP} {kind}", {}, work_dir=tmp, ready_timeout_s=60) as handle:
        yield handle.base_url


@pytest.fixture(scope="module")
def image_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from launched("image", tmp_path_factory.mktemp("image-app"))


@pytest.fixture(scope="module")
def chat_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from launched("chat", tmp_path_factory.mktemp("chat-app"))


def init_and_run(url: str, tmp: Path) -> RunResult:
    """What a user does: `qbench init URL -o app.yaml`, then `qbench run app.yaml` (shortened)."""
    draft = tmp / "app.yaml"
    result = CliRunner().invoke(app, ["init", url, "-o", str(draft)])
    assert result.exit_code == 0, result.output
    return run_scenario(load_scenario(draft), out_dir=tmp / "run", overrides=SHORT, live=False)


def check_phases(result: RunResult, *, streaming: bool) -> dict[str, dict[str, float]]:
    ok = [r for r in result.records if r.ok]
    assert ok, result.summary.errors_by_kind
    for r in ok:  # every request: Gradio's own figures, joined by event_id
        assert r.server_total_s is not None and r.server_fn_s is not None, r
        assert r.server_queue_wait_s is not None and r.server_preprocess_s is not None
        assert r.client_only_s is not None
        assert (r.server_streaming_diff_s or 0.0) > 0 if streaming else r.server_streaming_diff_s == 0.0
    traces = result.summary.server_traces
    assert traces is not None and traces.source == "traces" and traces.matched == traces.expected
    stored = json.loads((result.run_dir / "summary.json").read_text())
    assert stored["server_traces"]["matched"] == len([r for r in result.records if r.started_at_s])
    phases: dict[str, dict[str, float]] = stored["server_phases"]
    assert {"client_only_s", "server_queue_wait_s", "server_fn_s", "server_total_s"} <= set(phases)
    return phases


def test_image_interface_records_carry_gradio_phases(image_app: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRADIO_PROFILING", raising=False)
    assert knob_env({}, 7860)["GRADIO_PROFILING"] == "1"  # `GRADIO_PROFILING=1 python app.py`, as docs say
    monkeypatch.setenv("GRADIO_PROFILING", "0")  # a user's own choice is kept (the child inherits it)
    assert "GRADIO_PROFILING" not in knob_env({}, 7860)
    result = init_and_run(image_app, tmp_path)
    phases = check_phases(result, streaming=False)
    assert phases["server_postprocess_s"]["p50"] > 0  # the output image saved to the cache
    files = build_report(result.run_dir)
    assert "phases" in [c.name for c in files.charts]
    assert "Where the time went" in files.markdown.read_text()


def test_streaming_chat_records_carry_gradio_phases(chat_app: str, tmp_path: Path) -> None:
    result = init_and_run(chat_app, tmp_path)
    check_phases(result, streaming=True)
