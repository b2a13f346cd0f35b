"""docs/bentoml.md's commands, run as written against BentoML 1.4.40 in its own virtualenv
(examples/bentoml/service.py served on a free port in place of 3000; `bentoml-env/bin/python` is that
env's interpreter): the draft from its /schema.json (and, on the same service, qbench.run.target.frameworks'
BentoML live: the service named, its draft run with no error through the batcher), the capacity search
at reduced size with its advice in BentoML's terms, and a sweep of its own knobs, each point proven."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records
from qbench.run.target.frameworks import read_framework
from qbench.tune.servers.server_process import free_port
from tests.docs.test_docs_capacity import REDUCED_CAPACITY, doc_commands
from tests.run.target.test_frameworks_bentoml import BENTOML, bentoml_python, bentoml_service

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "bentoml.md"
DOC_URL = "http://127.0.0.1:3000"
ENV_PYTHON = "bentoml-env/bin/python"
#: the point's own run in requests (16 users, 12 rounds), the capacity search 3 probes of 1.5 s
REDUCED = ["--set", "load.users=16", "--set", "load.requests=192", "--capacity-trials", "3",
           "--capacity-duration", "1.5", "--capacity-tolerance", "25%", "--confirm-duration", "0"]
#: two points of the docs' three (the grid's ends), each a service of its own
GRID, REDUCED_GRID = "--grid max_batch_size=2,4,16 ", "--grid max_batch_size=2,16 "


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with bentoml_service(free_port(), tmp_path_factory.mktemp("bentoml")) as running:
        yield running


def qbench(line: str, url: str, extra: list[str]) -> str:
    args = [url if a == DOC_URL else a for a in shlex.split(line)]
    assert args[0] == "qbench", line
    out = CliRunner().invoke(app, [*args[1:], *extra])
    assert out.exit_code == 0, f"{line}\n{out.output}"
    return " ".join(out.output.split())


def test_the_service_and_the_init_command_run(url: str, tmp_path: Path) -> None:
    serve, init = doc_commands("## A scenario from the service", DOC)
    assert serve == "cd examples/bentoml && bentoml serve service:Batched --port 3000"  # the fixture's
    scenario = tmp_path / "s.yaml"
    said = qbench(init, url, ["-o", str(scenario)])
    assert "a BentoML server (service Batched: POST /predict (batchable))" in said
    drafted = yaml.safe_load(scenario.read_text())
    example = yaml.safe_load((ROOT / "examples" / "bentoml" / "predict.yaml").read_text())
    assert drafted["endpoint"] == example["endpoint"]  # the example is the draft, sized by hand
    assert drafted["payload"]["inputs"] == example["payload"]["inputs"]


# qbench.run.target.frameworks' BentoML, live, on the same service (one service start: ~6 s of CPU)


def test_the_running_service_is_named_by_what_it_serves(url: str) -> None:
    found = read_framework(url)
    assert found is not None and found.name == "BentoML" and found.batchable == ("/predict",)


def test_init_drafts_its_body_from_its_schema_and_the_scenario_runs_with_no_error(
    url: str, tmp_path: Path
) -> None:
    scenario = tmp_path / "bentoml.yaml"
    result = CliRunner().invoke(app, ["init", url, "-o", str(scenario)])
    assert result.exit_code == 0, result.output
    assert ("a BentoML server (service Batched: POST /predict (batchable)); its /schema.json declares POST "
            "/predict's JSON body: texts (array)") in result.output
    assert "each request sends one row" in result.output and "FILL IN" not in scenario.read_text()
    written = yaml.safe_load(scenario.read_text())
    assert written["endpoint"] == {"method": "POST", "path": "/predict", "body": {"texts": "$0"}}
    assert written["payload"]["inputs"] == [{"json": ["{word}"]}]  # one row of the batch
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["run", str(scenario), "--set", "load.duration=null", "--set",
                                      "load.requests=12", "--set", "load.warmup=0", "--set",
                                      "load.think_time=0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_records(out)
    assert len(records) == 12 and [r.error_kind for r in records] == [None] * 12, [
        r.error_message for r in records]
    sizes = [line for line in httpx.get(f"{url}/metrics").text.splitlines()
             if line.startswith("bentoml_service_adaptive_batch_size_count")]
    assert sizes, "BentoML's metrics show no batch"  # the requests went through its batcher


def test_the_capacity_command_runs_and_advises_bentomls_own_cap(url: str, tmp_path: Path) -> None:
    (line,) = doc_commands("## How many users", DOC)
    # with its overload run; p95 bound at 5 s, not the scenario's 0.5: the test is about a capacity found
    # and BentoML's own cap advised past it (a starved box once held p95 over 0.5 s down to 9 req/s, so no
    # capacity and no run past it)
    reduced = [a for a in REDUCED_CAPACITY if a != "--no-overload"] + ["--set", "slo.p95_latency_s=5"]
    said = qbench(line, url, ["--target", url, "--out", str(tmp_path), *reduced])
    (capacity,) = tmp_path.glob("capacity-*/capacity.json")
    result = json.loads(capacity.read_text())["result"]
    failed = [p for p in result["probes"] if p["verdict"] == "fail"]
    if result["capacity_rps"] is None:
        # where the box starved the service (six workers beside four busy loops: 11 completions/s behind
        # arrivals of 35/s), no capacity, every probe failing for falling behind: the honest answer
        assert failed and all(p["steadiness"] and not p["steadiness"]["steady"] for p in failed), said
        assert "no capacity" in said, said
        return
    assert "capacity:" in said and "req/s" in said, said
    assert "past it (x1.3)" in said, said
    assert 'traffic={"max_concurrency": N} in @bentoml.service' in said and "max_size=" not in said, said


def test_the_sweep_proves_each_batch_size_and_advises_bentoml_code(in_tmp: Path) -> None:
    (line,) = doc_commands("## A sweep of its own knobs", DOC)
    # p95 bound at 5 s, not the scenario's 0.5: the test is about each batch size proven and the advice as
    # BentoML code; a busy box once kept every point over 0.5 s, leaving no winner to advise
    assert GRID in line
    said = qbench(line.replace(ENV_PYTHON, shlex.quote(str(bentoml_python()))).replace(GRID, REDUCED_GRID),
                  DOC_URL, [*REDUCED, "--set", "slo.p95_latency_s=5"])
    (sweep,) = (in_tmp / "reports").glob("sweep-*")
    found = {p.parent.name: json.loads(p.read_text()) for p in (sweep / "points").glob("*/point.json")}
    assert sorted(found) == ["b16", "b2"]
    for point_id, point in found.items():
        check = point["knobs_applied"]
        assert isinstance(check, dict) and check["verdict"] == "applied", (point_id, check)
        size = int(point_id[1:])
        assert f"/predict runs max_batch_size={size}" in check["evidence"]
        hook = check["hook"]
        assert hook["framework"] == "bentoml" and hook["bentoml"]["version"] == BENTOML
        sizes = {int(k): v for k, v in hook["batch_sizes"]["/predict"].items()}  # counted in BentoML
        # every request that was served went through a counted batch (a few of the 192 may get BentoML's
        # 503 past max_latency_ms, never reaching the API: 4 did on a quiet box at six workers)
        ok = json.loads((sweep / "points" / point_id / "summary.json").read_text())["completed_ok"]
        assert max(sizes) <= size and sum(k * v for k, v in sizes.items()) >= ok > 0, (sizes, ok)
        if size > 2:  # 16 closed-loop users keep requests waiting while a batch runs: batches fill
            assert max(sizes) > 1, sizes
    assert (f"your service (BentoML {BENTOML}): @bentoml.api(max_batch_size=16, max_latency_ms=1000) -> "
            "recommended @bentoml.api(max_batch_size=") in said
    assert f"BentoML {BENTOML}: your service's decorators with the winner's settings" in said
    assert "@bentoml.api(batchable=True, max_batch_size=" in said
    assert 'max_size: BentoML queues without a cap unless its own is set' in said
    # which point wins is this box's: at 83, 143 and 307 req/s by construction the larger batches win on
    # a quiet one, but a busy one caps all three at what its client sends (69, 77 and 54 req/s once)
    assert "winner: max_batch_size=" in said and "@bentoml.service(workers=1)" in said, said


def test_a_batch_of_one_is_refused_before_the_service_starts(in_tmp: Path) -> None:
    (line,) = doc_commands("## A knob value BentoML refuses", DOC)
    args = [a for a in shlex.split(line.replace(ENV_PYTHON, "python"))]
    out = CliRunner().invoke(app, args[1:])
    said = " ".join(out.output.split())
    assert out.exit_code == 2 and "max_batch_size=1 is not one BentoML takes (it must be over 1" in said, said
    assert not list(in_tmp.glob("reports/sweep-*/points/*"))
