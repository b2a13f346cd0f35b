"""docs/rayserve.md's commands, run as written against Ray Serve 2.60 in its own virtualenv
(examples/rayserve/app.py served on a free port in place of 8000; `rayserve-env/bin/python` is that env's
interpreter): the draft from its route table and its code (and, on the same app, qbench.run.target.frameworks'
Ray Serve live: the framework read, a bare draft, the draft's run with no error), a sweep of its own
knobs at reduced size with each point proven and the batch cap said, the tuned app's capacity with
qbench starting it, and a knob Ray Serve lacks refused before the app starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records
from qbench.run.target.frameworks import read_framework
from qbench.tune.servers.server_process import free_port
from tests.docs.framework_docs import run_doc_line
from tests.docs.test_docs_capacity import REDUCED_CAPACITY, doc_commands
from tests.run.target.test_frameworks_rayserve import RAYSERVE, rayserve_app, rayserve_python

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rayserve.md"
DOC_URL = "http://127.0.0.1:8000"
ENV_PYTHON = "rayserve-env/bin/python"
#: the point's own run in requests (16 users, 12 rounds), the capacity search 3 probes of 1.5 s
REDUCED = ["--set", "load.users=16", "--set", "load.requests=192", "--capacity-trials", "3",
           "--capacity-duration", "1.5", "--capacity-tolerance", "25%", "--confirm-duration", "0"]
#: two points of the docs' four, each a Ray instance of its own (~15 s of CPU): the batch of 16 under both
#: max_ongoing_requests, capped by 5 and not by 32 (both knobs away from the app's own 4 and 5 somewhere)
GRID, REDUCED_GRID = "--grid max_batch_size=4,16 ", "--grid max_batch_size=16 "


def qbench(line: str, url: str, extra: list[str], code: int = 0) -> str:
    return run_doc_line(line, DOC_URL, url, extra, ENV_PYTHON, rayserve_python(), code)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with rayserve_app(free_port(), tmp_path) as running:
        yield running


def test_the_app_and_the_init_command_run(url: str, in_tmp: Path) -> None:
    serve, init = doc_commands("## A scenario from the app", DOC)
    assert serve == "rayserve-env/bin/python examples/rayserve/app.py 8000"  # the fixture's, on a free port
    scenario = in_tmp / "s.yaml"
    said = qbench(init, url, ["-o", str(scenario)])
    assert "a Ray Serve server (applications at / (default)); it publishes no API description" in said
    assert "its app's code reads input" in said
    drafted = yaml.safe_load(scenario.read_text())
    example = yaml.safe_load((ROOT / "examples" / "rayserve" / "predict.yaml").read_text())
    assert drafted["endpoint"] == example["endpoint"]  # the example is the draft, sized by hand
    assert drafted["endpoint"] == {"method": "POST", "path": "/", "body": {"input": "$0"}}
    # the same app (one Ray instance: ~15 s of CPU) for qbench.run.target.frameworks' Ray Serve, live:
    # known by its route table, a bare init says what to fill in, and the draft runs with no error
    found = read_framework(url)
    assert found is not None and found.name == "Ray Serve" and found.facts == "applications at / (default)"
    bare = CliRunner().invoke(app, ["init", url, "-o", str(in_tmp / "bare.yaml")])
    assert bare.exit_code == 0, bare.output
    assert "qbench init --app app.py" in " ".join(bare.output.split())
    assert "FILL IN" in (in_tmp / "bare.yaml").read_text() and "FILL IN" not in scenario.read_text()
    result = CliRunner().invoke(app, ["run", str(scenario), "--set", "load.duration=null", "--set",
                                      "load.requests=12", "--set", "load.warmup=0", "--set",
                                      "load.think_time=0", "--out", str(in_tmp / "r")])
    assert result.exit_code == 0, result.output
    records = read_records(in_tmp / "r")
    assert len(records) == 12 and [r.error_kind for r in records] == [None] * 12, [
        r.error_message for r in records]


def test_the_sweep_proves_each_point_and_says_where_max_ongoing_requests_caps_the_batch(in_tmp: Path) -> None:
    (line,) = doc_commands("## A sweep of its own knobs", DOC)
    assert GRID in line
    said = qbench(line.replace(GRID, REDUCED_GRID), DOC_URL, REDUCED)
    (sweep,) = (in_tmp / "reports").glob("sweep-*")
    found = {p.parent.name: json.loads(p.read_text()) for p in (sweep / "points").glob("*/point.json")}
    assert sorted(found) == ["b16-mo32", "b16-mo5"]
    for point_id, point in found.items():
        check = point["knobs_applied"]
        assert isinstance(check, dict) and check["verdict"] == "applied", (point_id, check)
        size, ongoing = (int(part.lstrip("bmo")) for part in point_id.split("-"))
        assert f"BatchedModel.predict runs max_batch_size={size}" in check["evidence"]
        assert f"deployment BatchedModel runs max_ongoing_requests={ongoing}" in check["evidence"]
        hook = check["hook"]
        assert hook["framework"] == "rayserve" and hook["rayserve"]["version"] == RAYSERVE
        sizes = {int(k): v for k, v in hook["batch_sizes"]["BatchedModel.predict"].items()}
        ok = json.loads((sweep / "points" / point_id / "summary.json").read_text())["completed_ok"]
        # every request served went through a counted batch, none above the knob nor above what one
        # replica holds at once (ray-project/ray#43288)
        assert max(sizes) <= min(size, ongoing) and sum(k * v for k, v in sizes.items()) >= ok > 0, sizes
        capped = any("ray-project/ray#43288" in line for line in check["evidence"])
        assert capped == (size > ongoing), (point_id, check["evidence"])
    assert (f"your app (Ray Serve {RAYSERVE}): @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.01, "
            "max_concurrent_batches=1) -> recommended @serve.batch(max_batch_size=") in said
    assert f"Ray Serve {RAYSERVE}: your deployment's decorators with the winner's settings" in said
    assert "@serve.deployment(num_replicas=1, max_ongoing_requests=" in said
    assert "max_queued_requests=" in said and "max_size: Ray Serve queues without a cap" in said, said


def test_a_knob_ray_serve_lacks_is_refused_before_the_app_starts(in_tmp: Path) -> None:
    (line,) = doc_commands("## A knob Ray Serve lacks", DOC)
    said = qbench(line, DOC_URL, [], code=2)
    assert "is a Ray Serve app, which has no 'concurrency_limit' knob; the equivalent there is " \
           "max_ongoing_requests" in said, said
    assert not list(in_tmp.glob("reports/sweep-*/points/*"))


def test_the_capacity_of_the_tuned_app_qbench_starts(in_tmp: Path) -> None:
    (line,) = doc_commands("## How many users: a capacity that holds", DOC)
    said = qbench(line, DOC_URL, REDUCED_CAPACITY)
    assert "started examples/rayserve/app_tuned.py at http://127.0.0.1:" in said and "capacity:" in said, said
    (log,) = in_tmp.glob("reports/app-app_tuned-*/server.log")
    record = json.loads((log.parent / "hook-record.json").read_text())
    assert record["framework"] == "rayserve" and record["launched"]
    (deployment,) = record["rayserve"]["deployments"]  # the app's own settings: nothing swept here
    assert deployment["effective"] == {"num_replicas": 1, "max_ongoing_requests": 32,
                                       "max_queued_requests": 57}
    (capacity,) = in_tmp.glob("reports/capacity-*/capacity.json")
    assert json.loads(capacity.read_text())["result"]["capacity_rps"] > 0
