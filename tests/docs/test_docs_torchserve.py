"""docs/torchserve.md: its commands run against examples/torchserve on a real TorchServe 0.12 (its own
cached virtualenv, Java 17), at reduced size: init drafts a scenario that runs with no error, the sweep
proves each point's batch size from TorchServe's management API and its workers' batches and advises
TorchServe configuration, capacity and soak run on the model qbench starts (the soak watching the Java
frontend and its workers), and a knob TorchServe lacks is refused before TorchServe starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records
from qbench.run.soak.health import read_health
from tests.docs.framework_docs import run_doc_line
from tests.docs.test_docs_capacity import REDUCED_CAPACITY, doc_commands
from tests.run.target.test_frameworks_torchserve import TORCHSERVE, torchserve_python, torchserve_server

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "torchserve.md"
DOC_URL = "http://127.0.0.1:8080"
ENV_PYTHON = "torchserve-env/bin/python"
#: the point's own run in requests (16 users, 12 rounds), the capacity search 3 probes of 1.5 s; two points
#: of the docs' three (one at a time and the batch of 16: the grid's ends)
REDUCED = ["--set", "load.users=16", "--set", "load.requests=192", "--capacity-trials", "3",
           "--capacity-duration", "1.5", "--capacity-tolerance", "25%", "--confirm-duration", "0"]
REDUCED_GRID = "batch_size=1,16"


def qbench(line: str, url: str, extra: list[str], code: int = 0) -> str:
    return run_doc_line(line, DOC_URL, url, extra, ENV_PYTHON, torchserve_python(), code)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with torchserve_server(tmp_path / "served") as running:
        yield running


def test_the_server_and_the_init_command_run_with_no_error(url: str, in_tmp: Path) -> None:
    serve, init = doc_commands("## A scenario from the server", DOC)
    # the fixture's: TorchServe in the example's folder on its config.properties (on free ports)
    assert serve == ("cd examples/torchserve && ../../torchserve-env/bin/torchserve --start --foreground "
                     "--ncs --ts-config config.properties")
    scenario = in_tmp / "s.yaml"
    said = qbench(init, url, ["-o", str(scenario)])
    assert f"a TorchServe server (TorchServe {TORCHSERVE}, management API at " in said, said
    assert "batched 1.0: batchSize 4, maxBatchDelay 10 ms, 1 of minWorkers 1 READY, job queue 100" in said
    assert "its app's code reads input" in said, said
    drafted = yaml.safe_load(scenario.read_text())
    example = yaml.safe_load((ROOT / "examples" / "torchserve" / "predict.yaml").read_text())
    assert drafted["endpoint"] == example["endpoint"]  # the example is the draft, sized by hand
    out = in_tmp / "r"
    result = CliRunner().invoke(app, ["run", str(scenario), "--set", "load.duration=null", "--set",
                                      "load.requests=24", "--set", "load.users=8", "--set", "load.warmup=0",
                                      "--set", "load.think_time=0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = read_records(out)
    assert len(records) == 24 and [r.error_kind for r in records] == [None] * 24, [
        r.error_message for r in records]


def test_the_sweep_proves_each_batch_size_and_advises_torchserve_configuration(in_tmp: Path) -> None:
    (line,) = doc_commands("## A sweep", DOC)
    assert "--grid batch_size=1,4,16" in line
    said = qbench(line.replace("batch_size=1,4,16", REDUCED_GRID), DOC_URL, REDUCED)
    (sweep,) = (in_tmp / "reports").glob("sweep-*")
    found = {p.parent.name: json.loads(p.read_text()) for p in (sweep / "points").glob("*/point.json")}
    assert sorted(found) == ["bs1", "bs16"]
    for point_id, point in found.items():
        size = int(point_id.removeprefix("bs"))
        check = point["knobs_applied"]
        assert isinstance(check, dict) and check["verdict"] == "applied", (point_id, check)
        assert f"model batched runs batchSize {size} (its management API)" in check["evidence"]
        hook = check["hook"]
        assert hook["framework"] == "torchserve" and hook["torchserve"]["version"] == TORCHSERVE
        (model,) = hook["torchserve"]["models"]
        assert model["app"]["batch_size"] == 4 and model["effective"]["batch_size"] == size
        sizes = {int(k): v for k, v in hook["batch_sizes"]["/predictions/batched"].items()}
        ok = json.loads((sweep / "points" / point_id / "summary.json").read_text())["completed_ok"]
        # every request served went through a counted batch, none above the knob
        assert max(sizes) <= size and sum(k * v for k, v in sizes.items()) >= ok > 0, sizes
    bs16 = {int(k) for k in found["bs16"]["knobs_applied"]["hook"]["batch_sizes"]["/predictions/batched"]}
    assert max(bs16) > 1  # 16 users at once: the frontend batched them
    assert f"TorchServe {TORCHSERVE}: your config.properties with the winner's settings" in said, said
    assert 'models={"batched": {"1.0": {"batchSize": ' in said and "job_queue_size=100" in said, said
    assert f"your config (TorchServe {TORCHSERVE}): model batched: batch_size=4 -> recommended " \
           "batch_size=" in said, said


def test_a_knob_torchserve_lacks_is_refused_before_it_starts(in_tmp: Path) -> None:
    (line,) = doc_commands("## A knob TorchServe lacks", DOC)
    said = qbench(line, DOC_URL, [], code=2)
    assert "is a TorchServe app, which has no 'concurrency_limit' knob; the equivalent there is workers " \
           "(worker processes per model; each runs one batch at a time)" in said, said
    assert not list(in_tmp.glob("reports/sweep-*/points/*"))


def test_the_capacity_of_the_model_qbench_starts(in_tmp: Path) -> None:
    (line,) = doc_commands("## How many users", DOC)
    # p95 bound at 5 s, not the scenario's 0.5: the test is about TorchServe started at its own settings and
    # a capacity found (a busy box starved a LitServe app's whole search once)
    said = qbench(line, DOC_URL, [*REDUCED_CAPACITY, "--set", "slo.p95_latency_s=5"])
    assert "started examples/torchserve/config.properties at http://127.0.0.1:" in said, said
    (log,) = in_tmp.glob("reports/app-config-*/server.log")
    record = json.loads((log.parent / "hook-record.json").read_text())
    assert record["framework"] == "torchserve" and record["launched"]
    (model,) = record["torchserve"]["models"]  # the configuration's own settings: nothing swept here
    assert model["set"] == {} and model["effective"]["batch_size"] == model["app"]["batch_size"] == 4
    (capacity,) = in_tmp.glob("reports/capacity-*/capacity.json")
    result = json.loads(capacity.read_text())["result"]
    # a capacity; or, where the box starved the server (four busy loops beside six workers: TorchServe
    # completed 1 request of 23 in a second), no capacity, every probe failing for falling behind
    failed = [p for p in result["probes"] if p["verdict"] == "fail"]
    starved = bool(failed) and all(p["steadiness"] and not p["steadiness"]["steady"] for p in failed)
    found = result["capacity_rps"]
    assert found is not None and found > 0 or found is None and starved and "no capacity" in said, said


def test_the_soak_of_the_model_qbench_starts_watches_its_java_frontend_and_workers(in_tmp: Path) -> None:
    (line,) = doc_commands("## Does it hold", DOC)
    assert "--duration 120 --rate 100" in line
    # 48 requests at 8 a second (the page's 12,000 at 100): a steady part for the process tree's samples.
    # Without the scenario's p95 bound of 0.5 s: what is checked here is what the soak watches, and a box
    # starved by busy loops beside the suite served this model's p95 in 0.67 s (the soak then exits 3)
    said = qbench(line.replace("--duration 120 --rate 100", "--duration 6 --rate 8"), DOC_URL,
                  ["--interval", "0.25", "--warmup", "1", "--no-live", "--set", "slo.p95_latency_s=null"])
    assert "started examples/torchserve/config.properties at http://127.0.0.1:" in said, said
    assert "server RSS" in said, said
    (folder,) = in_tmp.glob("reports/soak-*")
    samples = [s for s in read_health(folder / "health.jsonl") if s.rss_bytes is not None]
    assert samples, said
    # the launcher's tree: TorchServe's Java frontend and its Python worker under qbench's hook, so the
    # memory watched is TorchServe's, not the launcher's ~20 MiB
    assert max(s.children or 0 for s in samples) >= 2 and max(s.rss_bytes or 0 for s in samples) > 200 << 20
    records = read_records(folder)
    assert records and all(r.error_kind is None for r in records), {r.error_message for r in records}
