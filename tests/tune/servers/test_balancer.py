"""Replicas behind a real nginx: the generated config, session affinity, the failure without it (named),
and the capacity of 2 replicas against one.

The replicas: one `sleep` function of 100 ms with concurrency_limit 4 each, so 40 req/s per replica at
most (tests/tune/e2e/test_capacity_e2e.py measures one). Tests that need nginx skip, saying so, where it
is not installed (`make setup` installs it when it can: apt-get as root).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.diagnose.app_errors import (
    SESSIONS_KEPT,
    SPLIT_SESSIONS,
    SPLIT_UPLOADS,
    explain,
    most_open,
    split_sessions,
)
from qbench.run.records.schema import RequestRecord, read_records
from qbench.run.results.summary import Summary
from qbench.tune.capacity.prober import fail_split_sessions
from qbench.tune.points.measure import PointRun
from qbench.tune.servers import balancer
from qbench.tune.servers.app_process import launch_command
from qbench.tune.servers.balancer import (
    nginx_balancer,
    nginx_binary,
    nginx_config,
    reference_replicas,
)
from qbench.tune.servers.server_process import free_port
from qbench.tune.values.ceiling import Probe
from reference_server.settings import load_preset, parse_settings
from reference_server.testing import serve_in_thread
from tests.tune.e2e.test_capacity_e2e import SLEEP_4X100MS, sleep_scenario

ROOT = Path(__file__).resolve().parents[3]
needs_nginx = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (apt-get install "
                                 "nginx-light; `make setup` does it as root)")


@pytest.mark.parametrize(("affinity", "present", "absent"), [
    ("session", ["hash $qbench_session consistent;", "$request_body", "$arg_session_hash"], ["ip_hash"]),
    ("ip", ["ip_hash;"], ["hash $qbench_session", "$request_body"]),
    ("none", [], ["ip_hash", "hash $qbench_session"]),
])
def test_the_config_per_affinity(tmp_path: Path, affinity: str, present: list[str],
                                 absent: list[str]) -> None:
    conf = nginx_config(["http://127.0.0.1:7861", "127.0.0.1:7862"], 7860, affinity, tmp_path)
    assert "server 127.0.0.1:7861 max_fails=0;" in conf and "server 127.0.0.1:7862 max_fails=0;" in conf
    assert "listen 127.0.0.1:7860;" in conf and "proxy_buffering off;" in conf
    assert f"pid {tmp_path / 'nginx.pid'};" in conf
    assert all(p in conf for p in present) and not any(a in conf for a in absent)


def test_a_bad_affinity_or_upstream_names_it(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--affinity 'sticky'"), reference_replicas("echo", 2, "sticky"):
        pass
    with pytest.raises(ScenarioError, match="upstream 'http://nowhere'"):
        nginx_config(["http://nowhere"], 7860, "none", tmp_path)


def run_cli(*args: str) -> str:
    out = CliRunner().invoke(app, list(args))
    return out.output


@needs_nginx
def test_with_session_affinity_every_request_succeeds_on_both_replicas(tmp_path: Path) -> None:
    path = sleep_scenario(tmp_path)
    with reference_replicas(SLEEP_4X100MS, 2, "session") as front:
        run_cli("run", str(path), "--target", front.url, "--set", "load.rate=20", "--set", "load.duration=2",
                "--no-live", "--out", str(tmp_path / "run"))
        served = [httpx.get(h.base_url + "/status", timeout=10).json()["jobs_completed"]
                  for h in front.replicas]
    records = read_records(tmp_path / "run")
    assert len(records) >= 30 and all(r.ok for r in records)
    assert min(served) >= 5 and sum(served) >= len(records), served  # both replicas served a share


@needs_nginx
def test_without_affinity_the_cause_is_named(tmp_path: Path) -> None:
    """Round robin: each join and its /queue/data stream land on different replicas."""
    path = sleep_scenario(tmp_path, {"p95_latency_s": 1})
    with reference_replicas(SLEEP_4X100MS, 2, "none") as front:
        output = run_cli("run", str(path), "--target", front.url, "--set", "load.duration=2", "--no-live",
                         "--out", str(tmp_path / "run"))
        capacity = CliRunner().invoke(app, ["capacity", str(path), "--target", front.url, "--duration", "1",
                                            "--out", str(tmp_path / "c")])
    records = read_records(tmp_path / "run")
    assert records and sum(not r.ok for r in records) >= len(records) // 2
    text = " ".join(output.split())
    assert SPLIT_SESSIONS in text and "session affinity" in text
    assert "the app raised" not in text
    (note,) = json.loads((tmp_path / "run" / "summary.json").read_text())["app_notes"]
    assert f"The balancer at {front.url} (Server: nginx/" in note, note
    assert capacity.exit_code == 2 and "session affinity" in " ".join(capacity.output.split())


def image_run(url: str, out: Path, rate: float = 15, duration: float = 3) -> tuple[str, list[RequestRecord]]:
    """The README's image scenario (scenarios/image.yaml: an uploaded 224x224 JPEG per request) at
    `rate` req/s against `url`: the CLI's output and the records."""
    output = run_cli("run", str(ROOT / "scenarios" / "image.yaml"), "--target", url, "--set",
                     f"load.rate={rate}", "--set", f"load.duration={duration}", "--set", "load.warmup=0",
                     "--no-live", "--out", str(out))
    return output, read_records(out)


@needs_nginx
def test_the_image_scenario_behind_two_replicas_has_no_errors(tmp_path: Path) -> None:
    """`qbench serve --preset image-ideal --replicas 2`: every request's upload reaches the replica that
    runs its event (it names the session in its query, which the nginx hash reads first)."""
    with reference_replicas("image-ideal", 2, "session") as front:
        output, records = image_run(front.url, tmp_path / "run")
        served = [httpx.get(h.base_url + "/status", timeout=10).json()["jobs_completed"]
                  for h in front.replicas]
    assert len(records) >= 30 and all(r.ok for r in records), output
    assert min(served) >= 3, served  # both replicas served a share


#: A balancer that keeps a join and its stream together but not the uploads: the session_hash from the
#: join's JSON body, else the stream's query; an upload (multipart, no query read) hashes on "" (nginx's
#: hash then falls back to round robin, as it does for /config: discovery sees both replicas)
JOIN_ONLY = r"""
  map $request_body $qbench_body_session {
    "~\"session_hash\"\s*:\s*\"(?<qbench_bsh>[^\"]+)\"" $qbench_bsh;
    default "";
  }
  map $uri $qbench_session {
    "~/queue/data$" $arg_session_hash;
    default $qbench_body_session;
  }"""


@needs_nginx
def test_uploads_that_miss_their_replica_name_the_balancer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setattr(balancer, "SESSION_MAPS", JOIN_ONLY)
    with reference_replicas("image-ideal", 2, "session") as front:
        output, records = image_run(front.url, tmp_path / "run", rate=10, duration=2)
    assert records and sum(not r.ok for r in records) >= 3, output
    (note,) = json.loads((tmp_path / "run" / "summary.json").read_text())["app_notes"]
    assert SPLIT_UPLOADS in note and SPLIT_SESSIONS not in note, note
    assert f"The balancer at {front.url} (Server: nginx/" in note and "qbench's nginx" in note, note
    assert "the app raised" not in " ".join(output.split())


#: A replica for the capacity test: 4 x 200 ms, so 20 req/s at most (few requests per second keep the
#: generator, nginx and the replicas' CPU far from the 2 cores' limit).
SLEEP_4X200MS = {"functions": [{"api_name": "predict", "workload": "sleep",
                                "params": {"base_ms": 200, "per_item_ms": 0}, "concurrency_limit": 4}]}


def _replicas_capacity(scenario: Path, n: int, out: Path) -> float:
    """`qbench capacity` of n SLEEP_4X200MS replicas behind nginx (session affinity)."""
    with reference_replicas(SLEEP_4X200MS, n, "session") as front:
        result = CliRunner().invoke(app, [
            "capacity", str(scenario), "--target", front.url, "--duration", "5", "--tolerance", "10%",
            "--start-rate", str(16 * n), "--max-duration", "6", "--confirm-duration", "6",
            "--no-overload", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rate = _capacity_file(out)["result"]["capacity_rps"]
    assert isinstance(rate, float), rate
    return rate


def _capacity_file(out: Path) -> dict[str, Any]:
    """capacity.json of the one capacity run in `out`."""
    (folder,) = out.iterdir()
    data: dict[str, Any] = json.loads((folder / "capacity.json").read_text())
    return data


def _probes(out: Path) -> list[tuple[str, float, bool, str, float | None]]:
    """Each probe of the capacity run in `out`: kind, rate, passed, why (a failure's message), how long
    its generator waited for a core."""
    probes = _capacity_file(out)["result"]["probes"]
    return [(p["kind"], round(p["rate_rps"], 1), p["passed"], "; ".join(p["violations"]), p["host_wait"])
            for p in probes]


def _answer(out: Path) -> dict[str, str]:
    """The capacity run's answer in `out`, by label."""
    return dict(_capacity_file(out)["answer"])


def _held_at(scenario: Path, n: int, rate: float, out: Path) -> list[dict[str, Any]]:
    """One `qbench capacity` probe of n replicas at `rate` (8 s, judged: SLO and steady state) and, when
    it passes, its 8 s sustained confirmation: the probes of capacity.json past any it re-measured."""
    with reference_replicas(SLEEP_4X200MS, n, "session") as front:
        result = CliRunner().invoke(app, [
            "capacity", str(scenario), "--target", front.url, "--duration", "8", "--confirm-duration", "8",
            "--start-rate", f"{rate:.4g}", "--max-probes", "1", "--no-recheck", "--no-overload",
            "--out", str(out)])
    assert result.exit_code == 0, result.output
    probes: list[dict[str, Any]] = _capacity_file(out)["result"]["probes"]
    # a probe whose generator stalled (the host, six workers on two cores) is kept as "stalled", its
    # stall said, and measured once more (qbench.tune.capacity.bisect's measure_past_stall): the ones after
    stalled = [p for p in probes if p["kind"] == "stalled"]
    assert all(p["host_stall"] and not p["passed"] for p in stalled), stalled
    return [p for p in probes if p["kind"] != "stalled"]


@needs_nginx
def test_two_replicas_sustain_what_one_cannot(tmp_path: Path) -> None:
    """One replica of 4 x 200 ms serves at most 20 req/s (less its protocol's overhead): its capacity
    under p95 <= 1 s is found within that known ceiling. Behind nginx, two replicas then hold 1.3 x that
    ceiling (26 req/s), judged as every probe is (the SLO and the steady state) and confirmed by a
    sustained run, while one replica at the same rate, 30% past its ceiling, does not keep up; and the
    plan from the one replica's folder asks for 2 replicas for 1.8 x its capacity. The rate is set from
    the ceiling, not from the measured capacity: each replica of the pair sees about 65% of its ceiling
    (a hash splits Poisson arrivals at random), where p95 stays near 0.3 s on a quiet box; at 80% (1.6 x
    a measured 20) one 8 s confirmation in a few missed 0.6 s. The bound is 5 service times, not 3: on a
    busy box every hop (client, nginx, replica) waits for a core, and under 0.6 s one replica's answer
    was 9.3 req/s. Poisson arrivals: what each replica sees behind the hash, whatever the total's."""
    path = sleep_scenario(tmp_path, {"p95_latency_s": 1.0})
    scenario = yaml.safe_load(path.read_text())
    scenario["load"]["arrival"] = "poisson"
    path.write_text(yaml.safe_dump(scenario))
    one = _replicas_capacity(path, 1, tmp_path / "r1")
    probes = _probes(tmp_path / "r1")  # 75% of the ceiling or more, unless the answer says the host was busy
    assert one <= 20 and (one >= 15 or "host" in _answer(tmp_path / "r1")), (one, probes)
    rate = 1.3 * 20
    pair = _held_at(path, 2, rate, tmp_path / "pair")
    assert [(p["kind"], p["passed"]) for p in pair] == [("rate", True), ("confirm", True)], pair
    (alone,) = _held_at(path, 1, rate, tmp_path / "alone")
    assert not alone["passed"] and alone["violations"][0].startswith("not steady"), alone
    (folder,) = (tmp_path / "r1").iterdir()
    plan = CliRunner().invoke(app, ["plan", str(folder), "--rate", str(one * 1.8), "--headroom", "0"])
    assert plan.exit_code == 0, plan.output
    assert json.loads((folder / "plan.json").read_text())["replicas"] == 2, plan.output


def foreground(argv: list[str], port: int, expect: str) -> None:
    """Start a qbench command that serves in the foreground, check its ready line and that nginx answers,
    SIGTERM it, and check that it stopped (nginx gone with it)."""
    proc = subprocess.Popen([sys.executable, "-m", "qbench", *argv, "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"ready on http://127.0.0.1:{port} (nginx in front of 2 replicas" in line, line
        assert expect in line, line
        assert httpx.get(f"http://127.0.0.1:{port}/config", timeout=10).status_code == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/config", timeout=2)


@needs_nginx
def test_qbench_serve_replicas_and_qbench_balance_serve_until_stopped() -> None:
    foreground(["serve", "--preset", "sleep", "--replicas", "2"], free_port(), "affinity session")
    with serve_in_thread(load_preset("echo")) as a, serve_in_thread(load_preset("echo")) as b:
        foreground(["balance", a.url, b.url, "--affinity", "none"], free_port(), f"{a.url}, {b.url}")


class SessionsSeen:
    """ASGI middleware around a reference server: the session_hash each request names, by route (the
    query's, the heartbeat's path, the join's JSON body); `lose`: the first n streams ask for another
    session (the server lost theirs)."""

    def __init__(self, app: Any, lose: int = 0) -> None:
        self.app, self.lose = app, lose
        self.seen: list[tuple[str, str]] = []  # (route, session_hash)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"].rsplit("/", 1)[-1] if "/heartbeat/" not in scope["path"] else "heartbeat"
        query = parse_qs(scope["query_string"].decode())
        messages = []
        if route == "join":
            more = True
            while more:
                messages.append(await receive())
                more = messages[-1].get("more_body", False)
            body = b"".join(m.get("body", b"") for m in messages)
            self.seen.append((route, json.loads(body)["session_hash"]))
        elif route in ("upload", "data"):
            self.seen.append((route, query.get("session_hash", [""])[0]))
        if route == "data" and self.lose > 0:
            self.lose -= 1
            scope = {**scope, "query_string": b"session_hash=lost"}

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


#: The image preset's function, small: an image input uploaded by every request
IMAGE = {"functions": [{"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": 2},
                        "batch": True, "max_batch_size": 8, "concurrency_limit": 1}]}


def test_every_request_of_a_session_names_it(tmp_path: Path) -> None:
    """The upload names the session of its join (`?session_hash=`), as the stream does: a balancer that
    hashes on the session keeps all of them on one replica (no nginx needed to see it)."""
    scenario = yaml.safe_load((ROOT / "scenarios" / "image.yaml").read_text())
    scenario["payload"]["inputs"] = [{"image": {"width": 32, "height": 32, "format": "png"}}]
    scenario["load"] = {"burst": 6, "timeout": 30}
    path = tmp_path / "image.yaml"
    path.write_text(yaml.safe_dump(scenario))
    seen: list[SessionsSeen] = []
    with serve_in_thread(parse_settings(IMAGE), wrap=lambda a: seen.append(SessionsSeen(a)) or seen[-1]) as s:
        run_cli("run", str(path), "--target", s.url, "--no-live", "--out", str(tmp_path / "run"))
    assert all(r.ok for r in read_records(tmp_path / "run"))
    by_route = {route: sorted(h for r, h in seen[0].seen if r == route)
                for route in ("upload", "join", "data")}
    assert len(by_route["join"]) == 6 and len(set(by_route["join"])) == 6, by_route  # a session a request
    assert by_route["upload"] == by_route["join"] == by_route["data"], by_route


def test_a_session_lost_by_one_server_is_an_app_error_not_a_balancer(tmp_path: Path) -> None:
    """One server (no balancer in front) loses one session: the run counts an error of the app (the
    error-rate SLO judges it) and names no balancer."""
    path = sleep_scenario(tmp_path, {"p95_latency_s": 5, "error_rate": 0.5})
    seen: list[SessionsSeen] = []
    with serve_in_thread(parse_settings(SLEEP_4X100MS),
                         wrap=lambda a: seen.append(SessionsSeen(a, lose=1)) or seen[-1]) as server:
        output = run_cli("run", str(path), "--target", server.url, "--set", "load.duration=1", "--no-live",
                         "--out", str(tmp_path / "run"))
    records = read_records(tmp_path / "run")
    assert sum(not r.ok for r in records) == 1 and len(records) >= 8, output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["error_rate"] == 1 / len(records), summary
    (note,) = summary["app_notes"]
    assert "on a server with no balancer in front of it: the app lost sessions" in note
    assert "balancer at" not in " ".join(output.split()) and SPLIT_SESSIONS not in output


@needs_nginx
def test_a_session_lost_behind_a_proxy_with_one_server_is_the_apps_error(tmp_path: Path) -> None:
    """nginx in front of ONE server that loses a session: a proxy, not a balancer (discovery saw one
    server behind it), so the lost session is the app's error, said with what was seen."""
    path = sleep_scenario(tmp_path, {"p95_latency_s": 5, "error_rate": 0.5})
    seen: list[SessionsSeen] = []
    with serve_in_thread(parse_settings(SLEEP_4X100MS),
                         wrap=lambda a: seen.append(SessionsSeen(a, lose=1)) or seen[-1]) as server, \
            nginx_balancer([server.url], "none") as proxy:
        output = run_cli("run", str(path), "--target", proxy.url, "--set", "load.requests=12", "--no-live",
                         "--out", str(tmp_path / "run"))
    records = read_records(tmp_path / "run")
    assert sum(not r.ok for r in records) == 1, output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["server"]["front"]["upstreams"] == [server.url.removeprefix("http://")], run["server"]
    (note,) = json.loads((tmp_path / "run" / "summary.json").read_text())["app_notes"]
    assert f"behind the proxy at {proxy.url} (Server: nginx/" in note, note
    assert f"which showed only {server.url.removeprefix('http://')} behind it" in note, note
    assert "the app lost sessions" in note and SPLIT_SESSIONS not in " ".join(output.split())


def test_a_capacity_probe_blames_a_balancer_only_when_one_stands_in_front() -> None:
    records = [lost(0, 0.0, 0.1)] + [RequestRecord(i, 0, f"s{i}", "predict", False, i, sent_at_s=i,
                                                   completed_at_s=i + 0.1, outcome="ok")
                                     for i in range(1, 50)]
    alone, behind = Probe(10.0, passed=True), Probe(10.0, passed=True)
    fail_split_sessions(alone, PointRun(Summary(), None, records, {"config": {}}))
    nginx = {"front": {"url": "http://lb", "server": "nginx", "upstreams": ["app_id 1", "app_id 2"]}}
    fail_split_sessions(behind, PointRun(Summary(), None, records, nginx))
    assert alone.passed and not alone.violations  # the error-rate SLO judges the app's error
    assert not behind.passed and behind.violations == [
        "1/50 streams found no session: the join and its stream reached different servers: the balancer at "
        "http://lb (Server: nginx, 2 servers behind it: app_id 1, app_id 2) keeps no session affinity"]
    proxy = Probe(10.0, passed=True)  # a proxy with one app behind it: the app's error, as alone
    caddy = {"front": {"url": "http://lb", "server": "caddy", "upstreams": ["app_id 1"]}}
    fail_split_sessions(proxy, PointRun(Summary(), None, records, caddy))
    assert proxy.passed and not proxy.violations


def lost(request_id: int, sent: float, done: float) -> RequestRecord:
    return RequestRecord(request_id, 0, f"s{request_id}", "predict", False, sent, sent_at_s=sent,
                         completed_at_s=done, error_kind="server_error",
                         error_message="404: Not Found: session not found: ...")


NGINX = {"front": {"url": "http://127.0.0.1:7860", "server": "nginx/1.22.1", "upstreams": ["a:1", "b:2"]}}


def test_split_sessions_only_when_too_few_sessions_were_open_to_evict_one() -> None:
    few = [lost(i, i * 0.1, i * 0.1 + 0.05) for i in range(10)]
    text = split_sessions(few, NGINX)
    assert SPLIT_SESSIONS in text and "at most 1 requests were open" in text
    assert ("The balancer at http://127.0.0.1:7860 (Server: nginx/1.22.1, 2 servers behind it: a:1, b:2) "
            "does not keep a session") in text
    assert "10/10 streams found no session" in split_sessions(few, NGINX, short=True)
    assert explain(few, None, NGINX)[0] == text  # and not "the app raised" on them
    many = [lost(i, 0.0, 10.0) for i in range(SESSIONS_KEPT)]  # 2000 open at once: eviction is possible
    assert split_sessions(many, NGINX) == "" and most_open(many) == SESSIONS_KEPT
    assert split_sessions([RequestRecord(0, 0, "s", "predict", False, 0.0, sent_at_s=0.0)], NGINX) == ""
    assert split_sessions(few) == ""  # no balancer in front: the app's own errors


@needs_nginx
def test_real_gradio_replicas_with_and_without_affinity(tmp_path: Path) -> None:
    """Two Gradio 6.31 apps (examples/capacity/gradio_sleep_app.py) behind nginx: with session affinity
    every request succeeds; round robin splits joins from their streams, and the run says so."""
    app_file = ROOT / "examples" / "capacity" / "gradio_sleep_app.py"
    scenario = ROOT / "examples" / "capacity" / "gradio_sleep.yaml"
    with contextlib.ExitStack() as stack:
        apps = [stack.enter_context(launch_command(f"{sys.executable} {app_file} --port {{port}}", {},
                                                   work_dir=tmp_path / f"app{n}", ready_timeout_s=120))
                for n in range(2)]
        urls = [a.base_url for a in apps]
        outputs = {}
        for affinity in ("session", "none"):
            with nginx_balancer(urls, affinity) as front:
                outputs[affinity] = run_cli("run", str(scenario), "--target", front.url, "--set",
                                            "load.rate=20", "--set", "load.duration=3", "--no-live",
                                            "--out", str(tmp_path / affinity))
    records = read_records(tmp_path / "session")
    assert len(records) >= 40 and all(r.ok for r in records), outputs["session"]
    split = read_records(tmp_path / "none")
    assert sum(not r.ok for r in split) >= len(split) // 2, outputs["none"]
    text = " ".join(outputs["none"].split())
    assert SPLIT_SESSIONS in text and "session affinity" in text, outputs["none"]
