"""num_workers and ssr_mode on a real Gradio 6.31 app served with SSR (examples/page/ssr_app.py: Node
proxies the page and the API to Python, static-file workers behind it), swept the way docs/tuning.md
shows, at reduced size; and refused where no app is launched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app

ROOT = Path(__file__).resolve().parents[3]
# Points of 40 requests (2 a user), all measured: points of seconds measured none on a busy box (4 s, 1 s of
# it warm-up: both points "no completed request"). The page's p95 <= 3 s bound is the user's; here each
# point must be feasible on any box (a busy one renders 16 users' SSR pages slower than 3 s at p95), since
# what is checked is the knob's proof, the ranking and the advice, not this machine's speed.
REDUCED = ["--set", "load.duration=null", "--set", "load.requests=40", "--set", "load.warmup=0", "--set",
           "slo.p95_latency_s=30", "--capacity-trials", "0", "--confirm-duration", "0"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="Gradio's SSR needs Node on PATH")
def test_a_num_workers_sweep_on_an_ssr_app_ranks_points_with_the_knob_proven(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    argv = ["sweep", "examples/page/page_visits.yaml", "--app", "examples/page/ssr_app.py",
            "--grid", "num_workers=0,2", *REDUCED, "--out", str(tmp_path)]
    out = CliRunner().invoke(app, argv, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    (sweep,) = tmp_path.glob("sweep-*")
    points = sweep.glob("points/*/point.json")
    applied = {p.parent.name: json.loads(p.read_text())["knobs_applied"] for p in points}
    assert applied["nw2"]["verdict"] == "applied"
    assert applied["nw2"]["evidence"] == ["2 static-file workers answered /health behind SSR's Node proxy"]
    assert applied["nw0"]["evidence"] == ["num_workers 0: no static-file workers"]
    rec = json.loads((sweep / "recommendation.json").read_text())
    why = [(r["knobs"], r.get("verdict"), r.get("reason")) for r in rec["ranked"]]
    assert {r["knobs"]["num_workers"] for r in rec["ranked"]} == {0, 2} and rec["winner"] is not None, why
    said = " ".join(out.output.split())
    assert "-> recommended launch(num_workers=" in said and "demo.launch(max_threads=40, num_workers=" in said
    assert "demo.queue(default_concurrency_limit=4" in said  # the app's own limit, not Gradio's default


def test_launch_knobs_need_an_app_that_qbench_launches(tmp_path: Path) -> None:
    argv = ["sweep", "examples/sweep_sleep.yaml", "--grid", "num_workers=0,2", "--out", str(tmp_path)]
    out = CliRunner().invoke(app, argv)
    said = " ".join(out.output.split())
    assert out.exit_code != 0 and "knob 'num_workers': a launch() setting of a Gradio app that qbench " \
        "launches (--app app.py or --launch CMD)" in said and "--set launch.front_ends=N" in said
    assert not list(tmp_path.glob("sweep-*/points/*"))
