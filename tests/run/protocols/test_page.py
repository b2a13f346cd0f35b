"""Page loads as a browser makes them (qbench.run.protocols.page): the resources a page names, and a
journey that opens a real Gradio app's page before calling it."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.report.build import build_report
from qbench.run.protocols.page import entry_chunks, page_assets
from qbench.run.scenario.schema import parse_scenario
from reference_server.settings import synthetic_settings
from reference_server.testing import serve_in_thread
from tests.run.gradio_app_process import gradio_app

ROOT = Path(__file__).resolve().parents[3]

HTML = b"""<!doctype html><html><head>
<link rel="manifest" href="/manifest.json" />
<script type="module" crossorigin src="./assets/index-Dp.js"></script>
<link rel="stylesheet" crossorigin href="./assets/index-Di.css">
<script src="https://cdn.example.com/lib.js"></script>
<script src="http://127.0.0.1:7860/assets/abs.js"></script>
</head><body></body></html>"""


def test_a_page_names_its_own_scripts_and_stylesheets_not_a_cdns() -> None:
    assert page_assets(HTML, "http://127.0.0.1:7860/") == [
        "http://127.0.0.1:7860/assets/index-Dp.js", "http://127.0.0.1:7860/assets/index-Di.css",
        "http://127.0.0.1:7860/assets/abs.js"]
    script = b'import("./Index-Ak.js");const c="./Index-Ef.css";x("./Index-Ak.js");y="./data.json"'
    assert entry_chunks(script, "http://h/assets/index-Dp.js") == [
        "http://h/assets/Index-Ak.js", "http://h/assets/Index-Ef.css"]


def test_a_page_is_a_path_on_the_target() -> None:
    raw = {"protocol": "gradio", "target": "http://127.0.0.1:1", "endpoint": {"page": "index.html"},
           "load": {"burst": 1}}
    with pytest.raises(ScenarioError, match="endpoint.page 'index.html': expected a path on the target"):
        parse_scenario(raw, source="s.yaml")


def test_a_target_without_a_page_is_refused_before_any_load(tmp_path: Path) -> None:
    with serve_in_thread(synthetic_settings()) as server:  # the reference server serves no HTML page
        path = tmp_path / "page.yaml"
        path.write_text(yaml.safe_dump({"target": server.url, "endpoint": {"page": "/"},
                                        "load": {"burst": 2}}))
        out = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "run"), "--no-live"])
    said = " ".join(out.output.split())
    assert out.exit_code != 0 and "the page (or an asset it names) is not served" in said


APP = textwrap.dedent('''
    import sys
    import time

    import gradio as gr


    def shout(text: str) -> str:
        time.sleep(0.02)
        return text.upper()


    gr.Interface(shout, "text", "text", api_name="shout").launch(
        server_name="127.0.0.1", server_port=int(sys.argv[1]))
''')


@pytest.fixture(scope="module")
def gradio_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("page-app")
    with gradio_app(folder, APP) as url:
        yield url


def test_a_journey_opens_the_page_then_calls_the_app(gradio_page: str, tmp_path: Path) -> None:
    """The page load is its own endpoint in the records and the summary, beside the predictions."""
    scenario = {"name": "visit", "target": gradio_page, "protocol": "gradio",
                "journey": [{"endpoint": {"page": "/"}},
                            {"endpoint": {"api_name": "shout"}, "repeat": 2,
                             "payload": {"inputs": [{"text": {"words": [2, 4]}}]}}],
                "load": {"users": 3, "duration": 2, "warmup": 0, "timeout": 30}}
    path = tmp_path / "visit.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "run"), "--no-live"])
    assert out.exit_code == 0, out.output
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    pages = records[records["endpoint"] == "page /"]
    assert len(pages) > 0 and (pages["outcome"] == "ok").all() and (records["outcome"] == "ok").all()
    info = json.loads((tmp_path / "run" / "run.json").read_text())["server"]["mix"]["page /"]
    assert info["assets"] >= 2 and info["chunks"] > 0  # the entry script's chunks, read at discovery
    assert (pages["outputs"] == info["resources"]).all()  # every resource of the page, each visit
    assert (pages["bytes_received"] > info["html_bytes"]).all()
    assert "page /" in out.output and "shout" in out.output
    assert info["heartbeat"]  # Gradio 6 has the heartbeat route: each visit opened it for its journey


def test_the_end_of_a_journey_cancels_what_ran_beside_it() -> None:
    """SessionState.end: a page's heartbeat task (here a long sleep in its place) is cancelled."""
    import asyncio

    from qbench.run.protocols.base import SessionState

    async def scenario() -> bool:
        state = SessionState("s")
        beat = asyncio.create_task(asyncio.sleep(60))
        state.background.append(beat)
        await asyncio.sleep(0)
        state.end()
        await asyncio.sleep(0)
        return beat.cancelled() and not state.background

    assert asyncio.run(scenario())


CHAT = (ROOT / "examples" / "soak" / "chat_app.py").read_text().replace(
    "demo.launch()", "import sys\ndemo.launch(server_name='127.0.0.1', server_port=int(sys.argv[1]))")


def test_the_docs_chat_and_page_run_compares_the_chat_before_and_after(tmp_path: Path) -> None:
    """docs/traffic-mixes-and-journeys.md: 8 users chat, 50 open the page from 20 s (here 4 and 2 users):
    the page loads are reported apart, the chat before and after they joined. The windows are sized in
    chat requests, from one chat request's time on this machine (timed on the warm app first): a warm-up
    of one round, then 3 rounds of the 4 chat users alone (about 12 requests) and 6 with the page loads
    beside them (about 24, unslowed), so that each side holds MIN_SIDE (5) requests at any speed of the
    box, the chat slowed up to 3x by the page loads included."""
    with gradio_app(tmp_path, CHAT) as url:
        cycle = chat_round_s(url, tmp_path / "timing") + THINK_S
        warmup = round_up(cycle)
        start = round_up(warmup + 3 * cycle)
        duration = round_up(start + 6 * cycle)
        argv = ["run", "examples/page/chat_and_page.yaml", "--target", url, "--out", str(tmp_path / "run"),
                "--no-live", "--set", f"load.duration={duration:g}", "--set", f"load.warmup={warmup:g}",
                "--set", f"mix.1.start={start:g}", "--set", "mix.0.users=4", "--set", "mix.1.users=2",
                "--set", "load.users=6", "--set", f"load.think_time={THINK_S:g}"]
        out = CliRunner().invoke(app, argv, catch_exceptions=False)
    said = " ".join(out.output.split())
    assert out.exit_code == 0, out.output
    assert "page /" in said and "alongside: chat: latency p50" in said
    assert f"before page / joined at {start:g} s" in said
    (item,) = json.loads((tmp_path / "run" / "summary.json").read_text())["alongside"]
    assert item["endpoint"] == "chat" and item["before"]["requests"] >= 5 and item["after"]["requests"] >= 5
    assert item["p95_ratio"] is not None and item["p95_ratio"] > 0
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    pages = records[records["endpoint"] == "page /"]
    assert len(pages) > 0 and pages["intended_at_s"].min() >= start
    assert set(pages["user_id"]) <= set(range(4, 6))  # the page's own users, after the chat's 4
    markdown = build_report(tmp_path / "run").markdown.read_text()
    assert "### Before and after an entry joined" in markdown and "chat: latency p50" in markdown


THINK_S = 0.2  # each user's think time in the run (the page's 1 s, shorter)


def round_up(seconds: float) -> float:
    """To the next half second (a start the console prints as it was set)."""
    return math.ceil(seconds * 2) / 2


def chat_round_s(url: str, folder: Path) -> float:
    """One chat request's latency on the warm app (its median), with 4 users as in the run: 8 requests,
    the app's first calls (Gradio's own warm-up) left out."""
    folder.mkdir()
    scenario = {"protocol": "gradio", "target": url, "endpoint": {"api_name": "reply"},
                "payload": {"inputs": [{"text": {"words": [5, 20]}}]},
                "load": {"users": 4, "requests": 8, "timeout": 30}}
    (folder / "chat.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    argv = ["run", str(folder / "chat.yaml"), "--out", str(folder / "run"), "--no-live"]
    out = CliRunner().invoke(app, argv)
    assert out.exit_code == 0, out.output
    records = pd.read_parquet(folder / "run" / "records.parquet").sort_values("intended_at_s")
    assert (records["outcome"] == "ok").all()
    return float(records["latency_s"].iloc[4:].median())
