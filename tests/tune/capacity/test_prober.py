"""The prober's closed-loop estimate on a reference server whose timing is built in: a window in which
every user's first request outlives it (so all of them sit in the warm-up and nothing is measured) is
run again, longer, instead of ending `qbench capacity` with "completed no request"."""

from __future__ import annotations

from pathlib import Path

from qbench.tune.capacity.prober import ESTIMATE_STRETCH, Prober
from qbench.tune.values.constraints import Constraints
from reference_server.settings import parse_settings
from reference_server.testing import serve_in_thread
from tests.run.conftest import scenario

SLOW = {"functions": [{"api_name": "work", "workload": "sleep", "params": {"base_ms": 600},
                       "concurrency_limit": 1}]}


def test_an_estimate_that_measured_nothing_is_run_again_longer(tmp_path: Path) -> None:
    """4 users, one at a time, 0.6 s each, a 0.5 s window with a 0.3 s warm-up: the first requests all
    start in the warm-up and none ends within the window (by construction, at any speed), so the first
    window measures nothing; the next, 4 x longer, measures the users' second requests."""
    spec = scenario(endpoint={"api_name": "work"}, payload={"inputs": [{"text": {"words": [1, 2]}}]},
                    load={"rate": 1, "duration": 1, "timeout": 30})
    with serve_in_thread(parse_settings(SLOW)) as server:
        prober = Prober(spec, server.url, Constraints(slo={}), tmp_path / "probes", tmp_path,
                        base_overrides={"load.warmup": 0.3}, duration_s=0.5)
        probe, records = prober.estimate(4)
    first = tmp_path / "probes" / "00-estimate-u4"
    assert first.is_dir() and '"requests": 0' in (first / "summary.json").read_text()
    assert probe.completed_ok > 0 and probe.rate_rps is not None and probe.rate_rps > 0, probe
    assert probe.duration_s in (0.5 * ESTIMATE_STRETCH, 0.5 * ESTIMATE_STRETCH**2)
    assert probe.run_dir == f"probes/{prober.count - 1:02d}-estimate-u4-{probe.duration_s:g}s"
    assert records


def test_a_fresh_start_restarts_only_an_app_qbench_started_and_follows_its_url(tmp_path: Path) -> None:
    from qbench.tune.values.ceiling import Probe

    spec = scenario(endpoint={"api_name": "work"}, load={"rate": 1, "duration": 1})
    kept = Prober(spec, "http://127.0.0.1:1", Constraints(slo={}), tmp_path / "p", tmp_path)
    restarts: list[str] = []
    assert not kept.fresh_start(Probe(112.0, False, throughput_rps=13.0), restarts, "the confirm run")
    assert restarts == [] and kept.base_url == "http://127.0.0.1:1"  # not qbench's to restart
    started = Prober(spec, "http://127.0.0.1:1", Constraints(slo={}), tmp_path / "p", tmp_path,
                     restart=lambda: "http://127.0.0.1:2")
    assert started.fresh_start(Probe(112.0, False, throughput_rps=13.0), restarts, "the confirm run")
    assert started.base_url == "http://127.0.0.1:2"  # where the restarted app listens
    assert restarts == ["after the confirm run (at 112 req/s it served 13 ok/s)"]
