"""`qbench soak` against reference servers with deliberate faults (queue.leak_bytes_per_event,
leak_bound_events, stop_after_events): the leak's slope is found within its interval, no leak keeps only
the server's traces, a bounded leak is a bound, a stuck queue ends the run with that finding (exit 3).
Seconds, not hours: sampled every 0.25 s, judged on bytes a request, never on timings."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.options import RunOptions
from qbench.run.soak import command as soak_module
from qbench.run.soak.command import SoakOptions, SoakRun, find_server, parse_limits, read_report, run_soak
from qbench.run.soak.health import read_health
from qbench.tune.servers.balancer import nginx_balancer, nginx_binary
from qbench.tune.servers.server_process import reference_server_process
from reference_server.settings import load_preset
from reference_server.testing import serve_in_thread

KIB, MIB = 2**10, 2**20
SCENARIO = """\
name: soak-echo
protocol: gradio
endpoint: {api_name: echo}
payload: {seed: 1, inputs: [{text: {words: [3, 10]}}]}
load: {rate: 40, duration: DURATION, timeout: 10}
"""


def server(**queue: Any) -> dict[str, Any]:
    echo = {"api_name": "echo", "workload": "echo", "concurrency_limit": None}
    return {"functions": [echo], "queue": queue}


def soak(tmp_path: Path, settings: dict[str, Any], duration: float = 10, **options: Any) -> SoakRun:
    path = tmp_path / "soak.yaml"
    path.write_text(SCENARIO.replace("DURATION", str(duration)), encoding="utf-8")
    with reference_server_process(settings, work_dir=tmp_path / "server") as handle:
        run = RunOptions(path, handle.base_url, out=tmp_path / "run", live=False)
        return run_soak(run, SoakOptions(interval_s=0.25, warmup_s=2.0, pid=handle.pid, **options))


def test_a_leak_of_64_kib_a_request_is_found_with_its_slope(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def no_objects(_: object) -> None:
        raise AssertionError("the soak read every record back as an object (a day's soak: 43 M of them)")

    monkeypatch.setattr("qbench.run.pipeline.RunResult.records", property(no_objects))
    result = soak(tmp_path, server(leak_bytes_per_event=64 * KIB), limits=parse_limits(["rss=16GiB"]))
    rss = result.report.verdict("rss_bytes")
    assert rss is not None and rss.kind == "growing", result.report.lines()
    assert rss.per_1k is not None
    true = 64 * KIB * 1000
    assert 0.8 * true <= rss.per_1k.value <= 1.25 * true, rss.text()
    assert 0.9 * rss.per_1k.low <= true <= 1.1 * rss.per_1k.high, rss.text()
    assert rss.limit_after_requests is not None and rss.limit_after_s is not None
    samples = read_health(tmp_path / "run" / "health.jsonl")
    assert samples and max(s.status_leaked_bytes or 0 for s in samples) > 100 * 64 * KIB
    assert read_report(tmp_path / "run") == result.report  # soak.json reads itself back
    summary = (tmp_path / "run" / "summary.json").read_text(encoding="utf-8")
    assert '"soak"' in summary and "server RSS: growing" in summary


def test_without_a_leak_memory_keeps_only_the_traces_gradio_keeps(tmp_path: Path) -> None:
    """No deliberate leak: what the server keeps is its phase traces (as Gradio, the last 100,000 of
    ~1 KiB each), so 400 requests may read as growing by about a KiB a request: never the 64 KiB of
    a leak, and said with its rate a day rather than hidden under a share of the level."""
    result = soak(tmp_path, server())
    rss = result.report.verdict("rss_bytes")
    assert rss is not None and rss.per_1k is not None, result.report.lines()
    assert rss.kind in ("flat", "growing", "bounded", "unsure"), rss.text()
    assert rss.per_1k.value < 4 * KIB * 1000, rss.text()
    assert result.report.stuck is None and result.error() is None
    judged = {v.key for v in result.report.verdicts}
    assert {"p95_latency_s", "throughput_rps", "queue_size", "qbench_rss_bytes", "status_waiting"} <= judged


def test_a_leak_that_stops_at_a_bound_is_a_bound(tmp_path: Path) -> None:
    """256 KiB kept by each of the last 400 events: a rise of 100 MiB that stops. After it the server
    still keeps its phase traces (~1 KiB a request, as Gradio's last 100,000): where the run makes
    that creep certain the verdict is the creep, growing since the rise stopped, never the 256 KiB.
    The verdict's rise counts from the end of the 2 s warm-up, which holds 80 to ~125 of the 400 events
    (at 40 req/s; more when a busy client catches up late): the rest rise 68 MiB or more over ~7 s, ~28
    samples where a bend needs 8 on either side (200 events left a busy run ~3 s of rise, and it read
    the leak's stop as unsure), and ~10 s of bound follow it."""
    result = soak(tmp_path, server(leak_bytes_per_event=256 * KIB, leak_bound_events=400), duration=20)
    rss = result.report.verdict("rss_bytes")
    assert rss is not None and rss.kind in ("bounded", "growing"), result.report.lines()
    assert rss.bound is not None and rss.start is not None and rss.bound - rss.start > 40 * MIB, rss.text()
    assert rss.bound_at_requests is not None and 300 < rss.bound_at_requests < 560, rss.text()
    if rss.kind == "growing":
        assert rss.per_1k is not None and rss.per_1k.value < 8 * KIB * 1000, rss.text()


def test_a_stuck_queue_ends_the_run_with_that_finding(tmp_path: Path) -> None:
    path = tmp_path / "soak.yaml"
    path.write_text(SCENARIO.replace("DURATION", "60"), encoding="utf-8")
    with reference_server_process(server(stop_after_events=60), work_dir=tmp_path / "server") as handle:
        result = CliRunner().invoke(app, [
            "soak", str(path), "--target", handle.base_url, "--pid", str(handle.pid), "--interval", "0.25",
            "--stuck-after", "1.5", "--out", str(tmp_path / "run"), "--no-live"])
    assert result.exit_code == 3, result.output
    assert "STOPPED: stuck queue" in result.output and "none completed" in result.output
    report = read_report(tmp_path / "run")
    assert report is not None and report.stuck is not None
    assert report.requests < 40 * 30  # ended well before its 60 s


@pytest.mark.parametrize(("text", "key", "value"), [
    ("rss=16GiB", "rss_bytes", 16 * 2**30), ("cache=500MB", "cache_bytes", 500e6),
    ("p95=2", "p95_latency_s", 2.0),
])
def test_limits_parse(text: str, key: str, value: float) -> None:
    assert parse_limits([text]) == {key: value}


def test_the_docs_soak_commands_run(tmp_path: Path) -> None:
    """docs/soak.md at reduced size: the leaking server from examples/soak/leak_server.yaml soaked with
    --pid and --limit, its report; examples/my_app.py started by `qbench soak --app`. 320 requests over
    16 s: 56 health samples in the steady part at 0.25 s on a quiet box, so a busy box whose sampler is
    starved to a few a second still has the 8 a verdict needs (at 8 s, one had fewer: no verdict)."""
    runner, out = CliRunner(), tmp_path / "soak"
    leaking = Path("examples/soak/leak_server.yaml")  # qbench serve --config examples/soak/leak_server.yaml
    (tmp_path / "server").mkdir()
    with reference_server_process(leaking, work_dir=tmp_path / "server") as handle:
        result = runner.invoke(app, [
            "soak", "examples/soak/echo.yaml", "--target", handle.base_url, "--pid", str(handle.pid),
            "--duration", "16", "--set", "load.rate=20", "--limit", "rss=16GiB", "--interval", "0.25",
            "--warmup", "2", "--out", str(out), "--no-live"])
    assert result.exit_code == 0, result.output
    assert "server RSS: growing" in result.output and "reaches 16 GiB (--limit) after" in result.output
    report = runner.invoke(app, ["report", str(out)])  # qbench report reports/<soak-id>
    assert report.exit_code == 0 and "### Over time" in report.output
    mine = runner.invoke(app, [
        "soak", "examples/my_app.yaml", "--app", "examples/my_app.py", "--duration", "5",
        "--set", "load.users=8", "--interval", "0.25", "--warmup", "1", "--out", str(tmp_path / "app"),
        "--no-live"])
    # exit 3 is the scenario's SLO (p95 <= 3 s) judged and failed, an answer like exit 0: in 5 s with a
    # 1 s warm-up, a busy box's app still slow from its start read p95 3.6 s (the first requests waited)
    assert mine.exit_code == 0 or (mine.exit_code == 3 and "error: SLO violated" in mine.output), mine.output
    assert "started examples/my_app.py" in mine.output and "server RSS" in mine.output


def test_a_gradio_app_keeping_state_per_session_grows_by_about_that_state(tmp_path: Path) -> None:
    """examples/soak/state_app.py on the main env's Gradio, started by `qbench soak --app`: every request a
    new session with 256 KiB of gr.State, fewer sessions than its state_session_capacity (150), so the
    app's memory grows by about that per request (its measured slope on real releases: bench/RESULTS.md)."""
    out = tmp_path / "state"
    result = CliRunner().invoke(app, [
        "soak", "examples/soak/state.yaml", "--app", "examples/soak/state_app.py", "--duration", "10",
        "--set", "load.rate=10", "--interval", "0.25", "--warmup", "1", "--out", str(out), "--no-live"])
    assert result.exit_code == 0, result.output
    report = read_report(out)
    rss = report.verdict("rss_bytes") if report is not None else None
    assert rss is not None and rss.kind == "growing" and rss.per_1k is not None, result.output
    assert 150 * MIB < rss.per_1k.value < 1024 * MIB, rss.per_1k  # 256 KiB a request, give or take Gradio's


def test_a_soak_of_a_local_url_watches_the_process_listening_on_its_port(tmp_path: Path) -> None:
    """No --pid: the server's memory is still watched, found by the port its URL names."""
    path = tmp_path / "soak.yaml"
    path.write_text(SCENARIO.replace("DURATION", "4"), encoding="utf-8")
    with reference_server_process(server(), work_dir=tmp_path / "server") as handle:
        run = RunOptions(path, handle.base_url, out=tmp_path / "run", live=False)
        result = run_soak(run, SoakOptions(interval_s=0.25, warmup_s=1.0))
    assert result.report.watched is not None and f"pid {handle.pid}" in result.report.watched
    assert any(s.rss_bytes for s in read_health(tmp_path / "run" / "health.jsonl"))
    assert result.report.verdict("rss_bytes") is not None
    assert result.report.watched in result.report.lines()


@pytest.mark.parametrize(("url", "said"), [
    ("http://10.1.2.3:7860", "is not on this machine"),
    ("http://127.0.0.1:1", "no process qbench may read listens on port 1"),
])
def test_a_server_it_cannot_see_is_named_with_what_to_do(url: str, said: str) -> None:
    options, watched = find_server(SoakOptions(), url)
    assert options.pid is None and said in watched and "--pid" in watched and "--app" in watched


needs_nginx = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (apt-get install "
                                 "nginx-light; `make setup` does it as root)")


@needs_nginx
def test_a_port_owned_by_a_proxy_is_followed_to_the_server_behind_it() -> None:
    """qbench's nginx in front of two servers (this process's): its port is not the server's; the soak
    watches the first upstream's process, names it by pid and command line, and says which upstream is
    not watched."""
    with serve_in_thread(load_preset("echo")) as a, serve_in_thread(load_preset("echo")) as b, \
            nginx_balancer([a.url, b.url], "none") as front:
        options, watched = find_server(SoakOptions(), front.url)
    assert options.pid == os.getpid(), watched
    assert watched.startswith(f"watching the server's process tree: pid {os.getpid()} ("), watched
    port = front.url.rsplit(":", 1)[1]
    assert f"{a.url.removeprefix('http://')} behind port {port} belongs to nginx (pid " in watched, watched
    assert f"its other upstreams ({b.url.removeprefix('http://')}) are not watched: --pid chooses" in watched


def test_a_proxy_it_cannot_follow_is_never_watched_as_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port owned by docker-proxy (here: a server named so): its verdicts would be the proxy's, so it is
    not watched, and the line says so and what to do."""
    monkeypatch.setattr(soak_module, "_process_name", lambda pid: "docker-proxy")
    with serve_in_thread(load_preset("echo")) as server_:
        options, watched = find_server(SoakOptions(), server_.url)
    port = server_.url.rsplit(":", 1)[1]
    assert options.pid is None, watched
    assert f"port {port} belongs to docker-proxy (pid {os.getpid()}), a proxy, not the server" in watched
    assert "--pid" in watched and "--app" in watched


def test_the_ceilings_of_latency_and_open_files() -> None:
    """p95 latency's ceiling is the SLO's bound (a --limit wins); open files' the watched process's own
    soft limit on them."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soak_module.open_file_limit(os.getpid()) == (soft if soft != resource.RLIM_INFINITY else None)
    watched = SoakOptions(pid=os.getpid(), slo_p95_s=1.0)
    assert soak_module._ceiling("p95_latency_s", watched) == (1.0, "the SLO")
    limited = SoakOptions(pid=os.getpid(), slo_p95_s=1.0, limits={"p95_latency_s": 2.0})
    assert soak_module._ceiling("p95_latency_s", limited) == (2.0, "--limit")
    assert soak_module._ceiling("open_files", watched) == (float(soft), "the process's open-file limit")
    assert soak_module._ceiling("open_files", SoakOptions()) == (None, None)  # no process watched


def test_a_partial_or_mistyped_soak_json_reads_with_defaults(tmp_path: Path) -> None:
    (tmp_path / "soak.json").write_text('{"stuck": "", "requests": "many", "verdicts": [{"signal": "rss"}], '
                                        '"rate_rps": 4, "lines": ["written, not read"]}')
    report = read_report(tmp_path)
    assert report is not None and (report.stuck, report.requests, report.verdicts) == (None, 0, [])
    assert report.rate_rps == 4.0 and type(report.rate_rps) is float
