"""A new user's first run on apps written the way users write them (tests/run/demo_apps/*/run.py):
`qbench init` then a short `qbench run` of what it wrote has 0 errors, an app that raises is explained,
and a generator that outlives the run is reported as still running, not as timed out.

The apps run in this process (Gradio 6.31, one module-scoped launch each); bench/gradio_demos.py, which
launches demos as `qbench sweep --app` does (show_error set by the startup hook), runs on two of them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.options import RunOptions, run_with_options
from qbench.run.target.draft import init_scenario
from qbench.tune.servers.server_process import free_port

ROOT = Path(__file__).resolve().parents[3]
APPS = Path(__file__).resolve().parents[1].joinpath("demo_apps")
SHORT = {"load.users": 2, "load.think_time": 0, "load.ramp_up": 0, "load.warmup": 0, "load.duration": 1,
         "load.requests": 6, "load.timeout": 30, "load.drain": 20}


@pytest.fixture(scope="module")
def apps() -> Iterator[dict[str, str]]:
    """Demo name -> the URL of that app, launched in this process."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    launched: dict[str, Any] = {}
    try:
        for folder in sorted(p for p in APPS.iterdir() if (p / "run.py").is_file()):
            spec = importlib.util.spec_from_file_location(f"demo_app_{folder.name}", folder / "run.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                               quiet=True)
            launched[folder.name] = module.demo
        yield {name: demo.local_url.rstrip("/") for name, demo in launched.items()}
    finally:
        for demo in launched.values():
            demo.close()


def first_run(url: str, api: str, tmp: Path, **sets: Any) -> Any:
    """`qbench init URL --api API -o FILE`, then a short `qbench run FILE`: the finished run."""
    path = tmp / f"{api}.yaml"
    result = init_scenario(url, api, scenario_path=path)
    assert not result.draft.fill_in, result.draft.notes
    path.write_text(result.text.replace("THIS_FILE", str(path)), encoding="utf-8")
    return run_with_options(RunOptions(path, out=tmp / f"run-{api}", sets={**SHORT, **sets}, live=False))


def inputs_of(path: Path) -> list[dict[str, Any]]:
    return list(yaml.safe_load(path.read_text())["payload"]["inputs"])


@pytest.mark.parametrize(("name", "api", "users"), [
    ("transpose", "transpose", 2), ("zip_listing", "listing", 2), ("components", "check", 2),
    # one user: two requests with the same input at once make Gradio rewrite the cached output file
    # one of them is downloading (a cut download, stream_broken; a race of Gradio's file cache)
    ("tone", "tone", 1)])
def test_init_then_a_short_run_has_no_errors(apps: dict[str, str], tmp_path: Path, name: str, api: str,
                                             users: int) -> None:
    done = first_run(apps[name], api, tmp_path, **{"load.users": users})
    summary = done.result.summary
    assert summary.sent >= 2 and summary.errors == 0, (summary.error_samples, done.result.app_notes)


def test_what_init_writes_for_a_dataframe_a_zip_and_a_duration(apps: dict[str, str], tmp_path: Path) -> None:
    for name in ("transpose", "zip_listing", "tone"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(init_scenario(apps[name], None, scenario_path=path).text, encoding="utf-8")
    (table,) = inputs_of(tmp_path / "transpose.yaml")
    assert table["example"]["values"][0] == {"headers": ["1", "2", "3"], "data": [[1, 2, 3], [4, 5, 6]],
                                             "metadata": None}
    (archive,) = inputs_of(tmp_path / "zip_listing.yaml")
    assert archive["file"]["suffix"] == ".zip"
    _, duration = inputs_of(tmp_path / "tone.yaml")
    assert [int(v) for v in duration["choice"]["values"]] == [1, 2, 3, 4, 5]


def test_the_dataframe_value_is_what_gradio_client_sends(apps: dict[str, str], tmp_path: Path) -> None:
    """The value qbench sends for the example, given to gradio_client, gets the same answer."""
    from gradio_client import Client

    path = tmp_path / "t.yaml"
    path.write_text(init_scenario(apps["transpose"], None, scenario_path=path).text, encoding="utf-8")
    value = inputs_of(path)[0]["example"]["values"][0]
    answer = Client(apps["transpose"], verbose=False).predict(value, api_name="/transpose")
    assert answer["data"] == [[1, 4], [2, 5], [3, 6]]


def test_an_app_that_raises_is_explained(apps: dict[str, str], tmp_path: Path) -> None:
    done = first_run(apps["always_raises"], "predict", tmp_path)
    summary = done.result.summary
    assert summary.errors_by_kind == {"server_error": summary.sent}
    (note,) = done.result.app_notes
    assert note.startswith(f"/predict: the app raised on {summary.sent}/{summary.sent} requests; "
                           "Gradio hides the reason unless the app sets show_error=True")
    assert "the first input sent was [" in note and "--show-inputs" in note
    written = json.loads((done.result.run_dir / "summary.json").read_text())
    assert written["app_notes"] == [note]  # for whoever reads the run folder, not only the console
    from qbench.report.build import build_report

    markdown = build_report(done.result.run_dir).markdown.read_text()
    assert f"- **the app**: {note}" in markdown  # and the report, recomputed from the records


def test_show_inputs_prints_what_was_sent(apps: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "raises.yaml"
    path.write_text(init_scenario(apps["always_raises"], None, scenario_path=path).text, encoding="utf-8")
    sets = [f"--set={k}={v}" for k, v in SHORT.items()]
    out = CliRunner().invoke(app, ["run", str(path), *sets, "--no-live", "--show-inputs",
                                   "--out", str(tmp_path / "run")])
    assert out.exit_code == 3, out.output  # the SLO's error rate
    assert "the app: /predict: the app raised on" in " ".join(out.output.split())
    assert "inputs sent" in out.output and "/predict request 0: [" in out.output


def test_a_generator_that_outlives_the_run_is_still_running_not_timed_out(apps: dict[str, str],
                                                                           tmp_path: Path) -> None:
    done = first_run(apps["slow_counter"], "count", tmp_path, **{"load.requests": 2, "load.drain": 1})
    summary = done.result.summary
    assert summary.errors_by_kind == {"deadline": 2}
    assert "still running at the end of the run" in summary.error_samples["deadline"]
    (note,) = done.result.app_notes
    assert "/count: 2 event(s) still running at the end of the run" in note
    assert "within the 30 s timeout" in note and "did not time out" in note


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    """The bench's command line, its runs sized in requests (4 an endpoint: in 2.5 s a busy box's demo
    completed none); the ready wait is a bound, not a size: a Gradio app's start took over 40 s on a busy
    box (its import alone ~6 s of CPU on a quiet one), and a fast box never waits it out."""
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gradio_demos.py"), "--requests", "4",
                           "--ready-s", "150", *args], capture_output=True, text=True, timeout=240, cwd=ROOT,
                          check=False)


def test_the_demo_bench_runs_from_a_git_repository(tmp_path: Path) -> None:
    """bench/gradio_demos.py launches each demo with show_error (the app's message is recorded), from a
    git repository laid out as Gradio's (--gradio-git: demo/NAME/run.py)."""
    repo = tmp_path / "repo"
    shutil.copytree(APPS / "always_raises", repo / "demo" / "always_raises")
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "demos"]
    for argv in (["init", "-q"], ["add", "."], commit):
        subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
    proc = bench("--gradio-git", str(repo / ".git"), "--out", str(tmp_path / "git"))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # its one endpoint failed: below the goal
    (raised,) = json.loads((tmp_path / "git" / "results.json").read_text())
    assert raised["status"] == "failed" and raised["cause"] == "server_error: the model is not loaded"
    assert raised["explanation"][0].startswith("/predict: the app raised on")
    assert (tmp_path / "git" / "table.md").read_text().startswith("0 of 1 endpoints (0.0%) of 1 demos")


def test_the_demo_bench_runs_from_a_folder(tmp_path: Path) -> None:
    proc = bench("--demos", str(APPS), "--only", "transpose", "--out", str(tmp_path / "folder"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads((tmp_path / "folder" / "results.json").read_text())
    assert row["status"] == "ok" and row["sent"] >= 1 and row["errors"] == {}
