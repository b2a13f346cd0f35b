"""Benchmarks that compare with a peer (Locust, Gradio) fail loudly when it is missing; no benchmark runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
real_find_spec = importlib.util.find_spec


def load_bench(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import bench/<name>.py as a module (registered while the test runs: its dataclasses need it)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def without(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    """As if `missing` were not installed; and nothing may be started."""

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == missing else real_find_spec(name, *args)

    def no_process(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a benchmark process was started: {args}")

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(subprocess, "Popen", no_process)


def test_generator_vs_locust_exits_non_zero_naming_locust(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("generator_vs_locust", monkeypatch)
    without(monkeypatch, "locust")
    with pytest.raises(SystemExit) as exit_info:
        bench.main([])
    message = str(exit_info.value.code)
    assert exit_info.value.code not in (0, None)
    assert "Locust, which is not installed" in message and "pip install -e '.[bench]'" in message


def test_server_vs_gradio_exits_non_zero_naming_gradio(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("server_vs_gradio", monkeypatch)
    without(monkeypatch, "gradio")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--servers", "gradio,reference"])
    assert "Gradio, which is not installed" in str(exit_info.value.code)
    assert "pip install" in str(exit_info.value.code) and "--servers reference" in str(exit_info.value.code)
    bench.require_peers(bench.parse_args(["--servers", "reference"]))  # the reference alone needs no Gradio


def test_a_peer_that_sends_nothing_fails_the_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("generator_vs_locust", monkeypatch)

    class Exited:
        pid = 1

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def poll(self) -> int:
            return 1

        def terminate(self) -> None:
            pass

        def wait(self, timeout: float | None = None) -> int:
            return 1

    monkeypatch.setattr(bench.subprocess, "Popen", Exited)
    monkeypatch.setattr(bench.psutil, "Process", lambda pid: None)
    monkeypatch.setattr(bench, "_cpu", lambda ps: 0.0)
    monkeypatch.setattr(bench, "server_count", lambda port: 7)  # the server counted nothing new
    with pytest.raises(SystemExit, match="sent no request in 0 s"):
        bench.measure("Locust FastHttpUser", ["locust"], 1, warmup=0, window=0)


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
def test_every_benchmark_imports_and_answers_help(script: str) -> None:
    """`--help` loads each benchmark's imports (a renamed module fails here) and runs nothing."""
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_generator_bench_reports_each_rows_median(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("generator_vs_locust", monkeypatch)
    figures = ((900, 0.3), (1000, 0.1), (950, 0.2))
    rounds = [[bench.Result("a", rps, cpu, 10.0, "ref")] for rps, cpu in figures]
    (row,) = bench.median_rows(rounds)
    assert (row.name, row.rps, row.cpu_per_1k, row.ref) == ("a", 950, 0.2, "ref")


def test_soak_at_reduced_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/soak.py's four phases in seconds (the README's figures come from the full run): the excess
    is shed as queue_full, the unbounded queue grows, vanished clients leave nothing behind."""
    bench = load_bench("soak", monkeypatch)
    out = tmp_path / "soak.json"
    code = bench.main(["--minutes", "0.05", "--overload-seconds", "2", "--clients", "60", "--json", str(out)])
    figures = json.loads(out.read_text())
    assert code == 0, figures
    soak, shed, unbounded, vanish = (figures[k] for k in ("soak", "shed", "unbounded", "vanish"))
    assert soak["requests"] > 0 and soak["ok"] == soak["requests"]
    assert soak["server_mb_end"] > 0 and soak["generator_mb_end"] > 0
    assert shed["queue_full"] > 0 and shed["waiting_max"] <= shed["max_size"]
    assert unbounded["waiting_max"] > shed["max_size"]  # no max_size: the queue grows past it
    assert unbounded["drain_to_zero_s"] >= 0
    assert vanish["at_vanish"]["qbench_sessions"] >= 1  # they were there when they vanished
    assert vanish["after"] == {"qbench_running_jobs": 0, "qbench_sessions": 0, "qbench_events_live": 0}
    assert vanish["serves_after"] is True
def test_token_timing_joins_every_request_and_the_gaps_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/token_timing.py at reduced size: every request joined to the server's token log, the same
    token counts on both sides, and qbench's gaps within a few ms of the server's (1 ms on a quiet host;
    loosely here, where other suites share the cores)."""
    bench = load_bench("token_timing", monkeypatch)
    result = bench.measure(users=2, requests=6, max_tokens=5)
    assert (result["records"], result["joined"], result["token_mismatches"]) == (6, 6, 0)
    ttft, itl = result["agreement"]["ttft"], result["agreement"]["itl_mean"]
    assert 0.04 <= ttft["server_median_s"] <= ttft["client_median_s"]  # the preset's 50 ms prefill
    assert abs(itl["median_diff_s"]) < 0.005 and itl["server_median_s"] >= 0.015  # its 20 ms steps
