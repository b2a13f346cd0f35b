"""The Ray executor on a local 2-node Ray cluster (ray.cluster_utils.Cluster, one CPU per node): one
record per scheduled request on one clock, each node's share, the offered rate, an actor killed
mid-run -> generator_lost records, Ctrl-C, the CLI's --ray. One cluster for the module (its start-up
costs ~10 s on two cores)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.pipeline import run_scenario
from qbench.run.records.schema import read_jsonl, read_parquet
from qbench.run.results.summary import Summary
from qbench.run.scenario.schema import Load
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from qbench.run.load.ray_executor import NAMESPACE, actor_name  # noqa: E402

Factory = Callable[..., AbstractContextManager[RunningServer]]
STORE = 80 * 1024 * 1024  # bytes of object store per node (the minimum Ray accepts is ~75 MB)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two Ray nodes of one CPU each on this machine; this process is connected as the driver."""
    os.environ.setdefault("RAY_worker_niceness", "0")  # as `--ray local` does (Ray's default is 15)
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "object_store_memory": STORE},
    )
    c.add_node(num_cpus=1, object_store_memory=STORE)
    c.wait_for_nodes()
    ray.init(address=c.address, namespace=NAMESPACE, include_dashboard=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    """The `sleep` preset docs/ray.md names (api_name predict: 50 ms + 10 ms per batch item)."""
    from reference_server.settings import load_preset
    from reference_server.testing import serve_in_thread

    with serve_in_thread(load_preset("sleep")) as running:
        yield running


def spec(load: dict[str, Any]) -> Any:
    return scenario(
        endpoint={"api_name": "predict"}, payload={"inputs": [{"value": "x"}]},
        load={"executor": "ray", "timeout": 10, **load},
    )


def test_open_loop_split_over_two_nodes_on_one_clock(
    cluster: Any, server: RunningServer, tmp_path: Path
) -> None:
    result = run_scenario(spec({"rate": 40, "duration": 1.5, "sessions": 4}), target=server.url,
                          out_dir=tmp_path / "open", live=False)
    records = result.records
    assert [r.request_id for r in records] == list(range(60)) and all(r.ok for r in records)
    assert len(read_jsonl(result.run_dir / "records.jsonl")) == 60  # streamed while running
    assert len(read_parquet(result.run_dir / "records.parquet")) == 60
    times = [r.intended_at_s for r in records]
    assert times == sorted(times) and abs(times[-1] - 59 / 40) < 1e-9  # one schedule
    assert len({r.session_id for r in records}) == 4  # a pool of 4 shared out as 2 per actor
    g = result.summary.generator
    assert g.executor == "ray" and g.processes == 2 and len(g.workers) == 2
    assert [w.requests for w in g.workers] == [30, 30]  # each node's share: every 2nd request
    assert len({w.where.split(" (")[0] for w in g.workers}) == 2  # SPREAD: one actor per node
    assert all(w.cpu_s and w.p99_send_lag_s is not None for w in g.workers)
    # the offered rate is reached in total: 60 sends over ~1.5 s, none more than 0.5 s late
    sent = sorted(r.sent_at_s for r in records if r.sent_at_s is not None)
    assert len(sent) == 60 and sent[-1] - sent[0] < 1.5 + 0.5
    assert abs(result.summary.offered_rps - 40) < 2
    # one clock: every node's offset is measured and, on one machine, within its own uncertainty of 0
    nodes = json.loads((result.run_dir / "run.json").read_text())["clock"]["nodes"]
    assert len(nodes) == 2
    for node in nodes:
        assert node["rounds"] >= 4 and 0 <= node["uncertainty_s"] < 0.25
        assert abs(node["offset_s"]) <= node["uncertainty_s"] + 1e-3
    assert g.clock_uncertainty_s == max(n["uncertainty_s"] for n in nodes)
    again = Summary.from_dict(json.loads((result.run_dir / "summary.json").read_text())).generator
    assert again.workers == g.workers and again.executor == "ray"  # summary.json round-trips them
    # and the first sends of the two actors line up on it (same instant +- scheduling noise)
    assert all(abs(r.sent_at_s - r.intended_at_s) < 0.5 for r in records if r.sent_at_s is not None)


def test_closed_loop_users_split(cluster: Any, server: RunningServer, tmp_path: Path) -> None:
    """Also from a thread other than the main one (as a sweep runs its points): no signal handlers."""
    results: list[Any] = []
    run = threading.Thread(target=lambda: results.append(run_scenario(
        spec({"users": 4, "requests": 12}), target=server.url, out_dir=tmp_path / "c", live=False)))
    run.start()
    run.join(timeout=120)
    (result,) = results
    assert [r.request_id for r in result.records] == list(range(12)) and all(r.ok for r in result.records)
    assert {r.user_id for r in result.records} == {0, 1, 2, 3}
    assert [w.requests for w in result.summary.generator.workers] == [6, 6]


def test_actor_killed_mid_run_leaves_generator_lost_records(
    cluster: Any, server: RunningServer, tmp_path: Path
) -> None:
    """A generator dying mid-run: its unreported requests become generator_lost records, the other
    actor finishes its part, and `qbench run` exits 2 naming the lost actor."""
    path = tmp_path / "s.yaml"
    path.write_text("name: lost\nendpoint: {api_name: predict}\npayload: {inputs: [{value: x}]}\n"
                    "load: {rate: 20, duration: 2.5, timeout: 10}\n")
    out = tmp_path / "lost"
    killer = _kill_when_running(actor_name(out.name, 1), out / "records.jsonl")
    args = ["run", str(path), "--target", server.url, "--out", str(out), "--no-live", "--ray", "local"]
    result = CliRunner().invoke(app, args)  # this process is connected: `local` reuses the module's cluster
    killer.join(timeout=5)
    assert result.exit_code == 2, result.output
    assert "1 generator worker(s) lost mid-run" in result.output and "actor 1" in result.output
    assert "LOST" in result.output  # the generators table
    records = read_parquet(out / "records.parquet")
    assert sorted(r.request_id for r in records) == list(range(50))  # count == scheduled still
    lost = [r for r in records if r.error_kind == "generator_lost"]
    assert lost and all(r.request_id % 2 == 1 for r in lost)  # only actor 1's part
    assert all(r.ok for r in records if r.request_id % 2 == 0)  # the run went on with actor 0
    assert len(read_jsonl(out / "records.jsonl")) == 50
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors_by_kind"]["generator_lost"] == len(lost)
    assert "actor 1" in json.loads((out / "run.json").read_text())["lost_workers"][0]


def test_without_ray_the_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: noray\nendpoint: {api_name: work}\nload: {burst: 1}\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    result = CliRunner().invoke(app, ["run", str(path), "--target", "http://127.0.0.1:9", "--ray", "local"])
    assert result.exit_code == 2 and "pip install -e '.[ray]'" in result.output
    help_text = CliRunner().invoke(app, ["run", "--help"]).output
    assert "--ray" in help_text and "'.[ray]'" in help_text  # rich markup must not eat the extra's name


def _kill_when_running(name: str, records: Path, after: int = 6) -> threading.Thread:
    """Kill the named actor once `after` records have streamed in (a generator node dying mid-run)."""

    def kill() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if records.exists() and len(records.read_text().splitlines()) >= after:
                ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"qbench exited early: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError(f"{path}: fewer than {n} records after {timeout} s")


# ---------------------------------------------------------------- docs/ray.md

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "ray.md"


def section() -> str:
    return DOC.read_text(encoding="utf-8")


def readme_commands() -> list[list[str]]:
    """The section's `qbench ...` lines, comments and `&` dropped."""
    lines = [line.split("#", 1)[0].strip().rstrip("&").strip()
             for block in re.findall(r"```sh\n(.*?)```", section(), re.S) for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("qbench ")]


def test_the_readme_section_runs(
    cluster: Any, server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its commands at reduced size (a burst of 20) against the preset it names: `--ray local` in this
    process (already connected, so it reuses the module's cluster) and `--ray ray://HEAD:10001` in a
    subprocess, through a Ray Client server started for the cluster (`HEAD:6379`: the Ctrl-C test
    below). Its YAML example is a valid load section."""
    serve, local, client, gcs = readme_commands()
    assert serve[:3] == ["serve", "--preset", "sleep"] and local[-2:] == ["--ray", "local"]
    assert "ray://HEAD:10001" in client and "HEAD:6379" in gcs
    (example,) = re.findall(r"```yaml\n(.*?)```", section(), re.S)
    load = Load.model_validate(yaml.safe_load(example)["load"])
    assert load.executor == "ray" and load.workers == "auto"
    monkeypatch.chdir(ROOT)
    reduced = ["--set", "load.burst=20", "--no-live"]
    runs = [tmp_path / "local", tmp_path / "client"]
    out = CliRunner().invoke(app, [*local, "--target", server.url, "--out", str(runs[0]), *reduced])
    assert out.exit_code == 0, out.output
    with _ray_client_server(cluster.address) as address:
        args = [a.replace("ray://HEAD:10001", address).replace("http://SERVER:7860", server.url)
                for a in client]
        done = subprocess.run([sys.executable, "-m", "qbench", *args, "--out", str(runs[1]), *reduced],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
    for run in runs:
        records = read_parquet(run / "records.parquet")
        assert sorted(r.request_id for r in records) == list(range(20)) and all(r.ok for r in records)
        info = json.loads((run / "run.json").read_text())
        assert info["generator"]["executor"] == "ray" and len(info["clock"]["nodes"]) == 2


def test_ctrl_c_stops_every_actor_and_keeps_every_record(
    cluster: Any, server: RunningServer, tmp_path: Path
) -> None:
    """docs/ray.md's `--ray HEAD:6379 --workers 2` in a subprocess that joins the cluster at its address,
    as a 20 s rate load; SIGINT: exit 130, one record per scheduled request, the rest `interrupted`."""
    gcs = readme_commands()[3]
    out = tmp_path / "cli"
    args = [a.replace("HEAD:6379", cluster.address).replace("http://SERVER:7860", server.url) for a in gcs]
    longer = ["--set", "load.burst=null", "--set", "load.rate=20", "--set", "load.duration=20"]
    cmd = [sys.executable, "-m", "qbench", *args, "--out", str(out), "--no-live", *longer]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        _wait_for_lines(out / "records.jsonl", 6, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr.decode()[-2000:]
    records = read_parquet(out / "records.parquet")
    assert sorted(r.request_id for r in records) == list(range(400))
    assert {r.error_kind for r in records if not r.ok} == {"interrupted"}
    info = json.loads((out / "run.json").read_text())
    assert info["stop_kind"] == "interrupted" and len(info["clock"]["nodes"]) == 2
    assert b"Generators (ray)" in stdout


@contextlib.contextmanager
def _ray_client_server(gcs_address: str) -> Iterator[str]:
    """A Ray Client server for the cluster (what `ray start --head` runs on port 10001; legacy mode:
    one server process, no per-client server to spawn on a busy host)."""
    from qbench.tune.servers.server_process import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "ray.util.client.server", f"--address={gcs_address}", "--host=127.0.0.1",
           f"--port={port}", "--mode=legacy"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"ray://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_ray_error_is_told_by_the_actors_own_exception() -> None:
    from qbench.errors import TargetError
    from qbench.run.load.ray_executor import _cause

    class Wrapped(Exception):  # what RayTaskError carries: the actor's exception as `cause`
        cause = TargetError("http://10.0.0.9:7860/config: cannot connect")

    text = _cause(Wrapped("ray::GeneratorWorker.run() (pid=1, ip=10.0.0.2)\nTraceback ..."))
    assert text == "TargetError: http://10.0.0.9:7860/config: cannot connect"
    assert _cause(RuntimeError("first line\nsecond")) == "RuntimeError: first line"


class FakeRay:
    """Just enough of the `ray` module for worker_count and connect."""

    def __init__(self, cpus: list[float], fail: Exception | None = None) -> None:
        self.cpus, self.fail = cpus, fail
        self.inits: list[dict[str, Any]] = []

    def nodes(self) -> list[dict[str, Any]]:
        dead = {"Alive": False, "Resources": {"CPU": 64.0}}
        return [dead, *({"Alive": True, "Resources": {"CPU": c}} for c in self.cpus)]

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs: Any) -> None:
        if self.fail is not None:
            raise self.fail
        self.inits.append(kwargs)


def test_worker_count_is_one_per_alive_node_and_must_fit_the_cpus() -> None:
    from qbench.errors import ExecutorError
    from qbench.run.load.ray_executor import worker_count

    assert worker_count(FakeRay([4.0, 1.0, 0.0]), "auto") == 2  # a node without a CPU runs no generator
    assert worker_count(FakeRay([4.0, 1.0]), 5) == 5
    with pytest.raises(ExecutorError, match=r"load.workers: 6 needs 6 CPU\(s\).*it has 5 CPU\(s\) on 2 node"):
        worker_count(FakeRay([4.0, 1.0]), 6)


def test_connect_names_the_address_it_could_not_reach() -> None:
    from qbench.errors import ExecutorError
    from qbench.run.load.ray_executor import connect

    fake = FakeRay([1.0])
    assert connect(fake, "ray://head:10001") is True and fake.inits[0]["address"] == "ray://head:10001"
    assert connect(FakeRay([1.0]), None) is True  # None and "local": start Ray on this machine
    with pytest.raises(ExecutorError, match=r"Ray cluster at 'ray://nowhere:10001': could not connect"):
        connect(FakeRay([1.0], ConnectionError("refused")), "ray://nowhere:10001")


def test_actors_log_in_for_their_own_sessions(cluster: Any, tmp_path: Path) -> None:
    """An app behind a login: each actor logs in for its users; no secret reaches a file."""
    from reference_server.settings import synthetic_settings
    from reference_server.testing import serve_in_thread

    password = "pw-ray-secret-42"
    work = {"api_name": "work", "workload": "sleep", "params": {"base_ms": 10}, "concurrency_limit": None}
    settings = synthetic_settings(functions=[work], auth={"users": {"alice": password}})
    spec_ = scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"value": "x"}]},
                     load={"executor": "ray", "users": 2, "requests": 6, "timeout": 10},
                     auth={"login": {"username": "alice", "password": password}})
    with serve_in_thread(settings) as locked:
        result = run_scenario(spec_, target=locked.url, out_dir=tmp_path / "auth", live=False)
    assert len(result.records) == 6 and all(r.ok for r in result.records)
    assert result.run_info.auth["logins"] == 2  # one session per actor (its one user), each logged in
    for name in ("run.json", "summary.json", "records.jsonl"):
        assert password not in (result.run_dir / name).read_text()


def test_the_actor_is_threaded_so_no_runtime_env_picks_its_loop() -> None:
    """Ray makes an actor with any `async def` method an async actor on a loop of Ray's choosing (uvloop
    where installed); GeneratorWorker has none, so its `run` makes the loop the driver names."""
    import inspect

    from qbench.run.load.ray_executor import GeneratorWorker

    methods = [m for _, m in inspect.getmembers(GeneratorWorker, inspect.isfunction)]
    assert methods and not any(inspect.iscoroutinefunction(m) for m in methods)
