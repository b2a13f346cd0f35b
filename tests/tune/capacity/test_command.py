"""How `qbench capacity` makes its CapacityConfig from its options and the scenario, and the rate an
app that ages with use holds once the search is over (capacity_command.rate_now), on a simulated app whose
ageing law is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from qbench.tune.capacity import command as capacity_command
from qbench.tune.capacity.answer import describe
from qbench.tune.capacity.bisect import SearchPlan
from qbench.tune.capacity.command import capacity_config
from qbench.tune.values.ceiling import Capacity, Probe
from qbench.tune.values.constraints import Constraints
from qbench.tune.verdicts.degradation import Degradation


def test_probes_of_streams_last_three_stream_lengths(tmp_path: Path) -> None:
    """A stream of 20 chunks 0.25 s apart lasts 5 s: a probe shorter than 15 s would end before most of
    its streams do."""
    def scenario(name: str, **stream: float) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump({
            "target": "http://127.0.0.1:1", "endpoint": {"api_name": "level", **stream},
            "payload": {"inputs": [{"audio": {"seconds": 0.25}}]}, "load": {"users": 1, "duration": 5}}))
        return path

    config = capacity_config(scenario("mic.yaml", chunks=20, stream_every=0.25), slo={"p95_ttfo_s": 1},
                             duration_s=5, max_duration_s=10, out_root=tmp_path)
    assert (config.probe_duration_s, config.max_probe_duration_s) == (15, 15)
    config = capacity_config(scenario("click.yaml"), slo={"p95_latency_s": 1}, duration_s=5,
                             out_root=tmp_path)
    assert config.probe_duration_s == 5


class AgeingApp:
    """A fake Prober for an app whose service time grows with the requests it has served (s0 + k x n),
    four workers: a sustained run at `rate` holds while the load on its workers at the run's END stays
    under `HOLDS` (the SLO's share), and each run ages the app by the requests it serves."""

    HOLDS = 0.9

    def __init__(self, s0: float, k: float, served: int, confirm_s: float = 60.0,
                 stuck: bool = False) -> None:
        self.s0, self.k, self.served, self.confirm_duration_s = s0, k, served, confirm_s
        self.stuck = stuck  # left collapsed: a backlog it never drains fails every run
        self.root = Path(".")
        self.rates: list[float] = []

    def service(self, more: float = 0.0) -> float:
        return self.s0 + self.k * (self.served + more)

    def now(self, rate: float) -> Probe:
        self.rates.append(rate)
        requests = rate * self.confirm_duration_s
        passed = rate * self.service(requests) / 4 <= self.HOLDS and not self.stuck
        served = rate if passed else 4 / self.service(requests)
        self.served += int(served * self.confirm_duration_s)
        return Probe(rate, passed, kind="now", run_dir=f"now-{rate:.4g}", duration_s=self.confirm_duration_s,
                     completed_ok=int(served * self.confirm_duration_s), throughput_rps=served,
                     p95_latency_s=0.4 if passed else 5.0)


def ageing_capacity(app: AgeingApp, rate: float, before: int) -> Capacity:
    """The answer `rate` confirmed when the app had served `before` requests, and the run after the burst
    (now): the two service times as the burst comparison measured them."""
    start_s, now_s = app.s0 + app.k * before, app.service()
    moved = Degradation(rate, "service time", start_s, now_s, now_s / start_s - 1, 0.05, 0.5,
                        start_probe="c", end_probe="a", requests_between=app.served - before)
    probes = [Probe(rate, True, kind="confirm", run_dir="c", duration_s=60, completed_ok=int(rate * 60)),
              Probe(rate * 1.3, False, kind="overload", run_dir="o", completed_ok=app.served - before),
              Probe(rate, False, kind="after", run_dir="a", completed_ok=10)]
    return Capacity(rate, rate * 1.1, 0.1, True, True, probes, burst_change=moved)


@pytest.mark.parametrize(("s0", "k", "before", "burst"), [
    (0.1, 1e-5, 2_000, 1_500),  # a chat app keeping every message: +10 us a request, aged by its burst
    (0.1, 5e-5, 1_000, 600),  # one that ages fast: the rate now far under the confirmed one
    (0.05, 2e-6, 10_000, 3_000),  # one that ages slowly
])
def test_an_ageing_apps_rate_now_holds_the_next_sustained_run(s0: float, k: float, before: int,
                                                              burst: int) -> None:
    """The truth: the app's law. The rate `rate_now` measures after the burst holds a 60 s run right
    after it (the user's), though that run ages the app further; the answer says it."""
    app = AgeingApp(s0, k, before)
    rate = 0.9 * 4 / app.service(60 * 4 / app.service())  # what the confirmation held, to the percent
    app.served += int(rate * 60) + burst  # the confirmation, then the burst past it
    capacity = ageing_capacity(app, rate, before)
    capacity_command.rate_now(app, capacity, SearchPlan(tolerance=0.1))  # type: ignore[arg-type]
    now = capacity.now
    assert now is not None and now.rate_rps is not None and now.rate_rps < rate, (now, app.rates)
    assert app.now(now.rate_rps).passed, (now, app.rates)  # the user's run right after
    assert now.requests == sum(p.completed_ok for p in capacity.probes[:3])
    assert now.slope_s == pytest.approx(k, rel=0.02)
    lines = dict(describe(capacity, Constraints(slo={"p95_latency_s": 1.0}), 10.0))
    assert f"it held {now.rate_rps:.3g} req/s (now, below)" in lines["capacity"]
    assert "collapsed" not in lines["capacity"] and "the burst aged the app (now, below)" in lines[
        "after the burst"]
    assert f"{now.rate_rps:.3g} req/s held the whole 60 s run right after it" in lines["now"]
    assert "after an hour more" in lines["now"]
    assert Capacity.from_dict(capacity.to_dict()).now == now


def test_an_ageing_app_that_holds_no_rate_now_says_restart_it() -> None:
    app = AgeingApp(0.1, 1e-4, 1_000, stuck=True)
    capacity = ageing_capacity(app, 20.0, 0)
    capacity_command.rate_now(app, capacity, SearchPlan(tolerance=0.1, confirm_tries=3))  # type: ignore[arg-type]
    assert capacity.now is not None and capacity.now.rate_rps is None and len(app.rates) == 3
    lines = dict(describe(capacity, Constraints(slo={"p95_latency_s": 1.0}), 10.0))
    assert "no rate tried held: restart it (now, below)" in lines["capacity"]
    assert "no sustained run held; failed at" in lines["now"]


def test_an_app_that_does_not_age_gets_no_rate_now() -> None:
    app = AgeingApp(0.1, 0.0, 1_000)
    capacity = ageing_capacity(app, 30.0, 1_000)
    capacity.burst_change = Degradation(30.0, "service time", 0.1, 0.1, 0.0, -0.02, 0.02,
                                        requests_between=2_000)
    capacity_command.rate_now(app, capacity, SearchPlan())  # type: ignore[arg-type]
    assert capacity.now is None and app.rates == []


def test_without_a_burst_the_recheck_is_carried_forward_over_the_requests_since(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-overload: the recheck found +10 us a request (100 -> 110 ms over 1,000 requests); 2,400 ok
    requests ran after it (the confirmations, which read alike), so the app is taken to serve at 134 ms
    now, said so."""
    from tests.tune.verdicts.test_degradation import records

    monkeypatch.setattr(capacity_command, "read_records", lambda path: records(np.full(100, 0.12)))
    app = AgeingApp(0.1, 1e-5, 3_400)
    app.root = tmp_path
    grown = Degradation(20.0, "service time", 0.1, 0.11, 0.1, 0.05, 0.15, start_probe="r0",
                        end_probe="r1", requests_between=1_000)
    probes = [Probe(20.0, True, kind="rate", run_dir="r0", completed_ok=100),
              Probe(20.0, True, kind="recheck", run_dir="r1", completed_ok=100),
              Probe(20.0, True, kind="confirm", run_dir="c", duration_s=60, completed_ok=1_200),
              Probe(20.0, True, kind="confirm", run_dir="c2", duration_s=60, completed_ok=1_200)]
    capacity = Capacity(20.0, 22.0, 0.1, True, True, probes, degradation=grown)
    capacity_command.rate_now(app, capacity, SearchPlan(tolerance=0.1))  # type: ignore[arg-type]
    now = capacity.now
    assert now is not None and now.start_at == "the recheck" and now.now_s == pytest.approx(0.134)
    assert now.rate_rps is not None and app.now(now.rate_rps).passed
    lines = dict(describe(capacity, Constraints(slo={"p95_latency_s": 1.0}), 10.0))
    assert "p50 110 ms at the recheck, 134 ms (projected) once qbench's 2,600 requests" in lines["now"]
    assert lines["with use"].endswith("(+10 us per request) (the rate it holds now: below)")


def test_two_confirmations_that_drift_apart_are_the_ageing_a_short_recheck_missed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metastable answer holds two 60 s confirmations in a row; an app that ages serves the second
    slower (154 -> 180 ms over the first's 1,100 requests: a Gradio chat app keeping every message, where
    the search's recheck read -2%). That is the ageing `rate_now` sizes the rate for now from, carried over
    the burst's 800 requests since; the same two runs of a server that does not age are no such finding."""
    from tests.tune.verdicts.test_degradation import records

    served = {"c1": np.full(1100, 0.154), "c2": np.full(1100, 0.180)}
    monkeypatch.setattr(capacity_command, "read_records", lambda path: records(served[path.name]))
    probes = [Probe(18.5, True, kind="confirm", run_dir="c1", duration_s=60, completed_ok=1100),
              Probe(18.5, True, kind="confirm", run_dir="c2", duration_s=60, completed_ok=1100),
              Probe(24.0, False, kind="overload", run_dir="o", completed_ok=700),
              Probe(18.5, True, kind="after", run_dir="a", completed_ok=100)]
    capacity = Capacity(18.5, 20.0, 0.1, True, True, probes)

    class Root:
        root = tmp_path

    found = capacity_command.repeats_change(Root(), capacity)  # type: ignore[arg-type]
    assert found is not None and found.requests_between == 1100 and found.degraded
    law = capacity_command.ageing(capacity, found)
    assert law is not None and law[4] == "the first confirmation"
    assert law[0] == pytest.approx(0.154) and law[1] == pytest.approx(0.180 + 800 * 0.026 / 1100)
    served["c2"] = np.full(1100, 0.155)
    steady = capacity_command.repeats_change(Root(), capacity)  # type: ignore[arg-type]
    assert steady is not None and capacity_command.ageing(capacity, steady) is None


def test_a_recheck_above_the_rate_that_held_compares_no_latency() -> None:
    """The sleep preset: the recheck at 59.5 req/s read latency +9% (its queue's noise), then 59.5 failed
    its confirmation and 54.1 held: the latency change is dropped, saying why; the service time stays.
    A recheck of latency alone (plain HTTP) at such a rate is not judged; one at or under the answer is
    kept as it was."""
    from qbench.tune.verdicts.degradation import Change

    latency = Change(0.2, 0.218, 0.09, 0.02, 0.15)
    found = Degradation(59.5, "service time", 0.1, 0.104, 0.04, 0.02, 0.05, latency=latency)
    capacity = Capacity(54.1, 59.5, 0.1, True, True, degradation=found)
    capacity_command.unsustained_recheck(capacity)
    kept = capacity.degradation
    assert kept is not None and kept.latency is None and kept.verdict == "inconclusive"
    assert kept.note == ("latency not compared: 59.5 req/s is above 54.1, the rate that held a sustained "
                         "run, so the queue set its latency")
    http = Capacity(54.1, 59.5, 0.1, True, True,
                    degradation=Degradation(59.5, "latency from the send", 0.2, 0.23, 0.15, 0.1, 0.2))
    capacity_command.unsustained_recheck(http)
    assert http.degradation is None and http.over_the_search is not None
    assert http.over_the_search.startswith("not judged: 59.5 req/s is above 54.1")
    under = Capacity(60.0, 66.0, 0.1, True, True, degradation=found)
    capacity_command.unsustained_recheck(under)
    assert under.degradation == found
