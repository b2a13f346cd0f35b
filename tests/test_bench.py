"""Benchmarks that compare with a peer (Locust, Gradio) fail loudly when it is missing; no benchmark runs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
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


def test_ray_scaling_exits_non_zero_naming_the_ray_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("ray_scaling", monkeypatch)
    without(monkeypatch, "ray")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--repeats", "1"])
    assert "needs Ray, which is not installed" in str(exit_info.value.code)
    assert "pip install -e '.[ray]'" in str(exit_info.value.code)


def test_server_vs_gradio_exits_non_zero_naming_gradio(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("server_vs_gradio", monkeypatch)
    without(monkeypatch, "gradio")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--servers", "gradio,reference"])
    assert "Gradio, which is not installed" in str(exit_info.value.code)
    assert "pip install" in str(exit_info.value.code) and "--servers reference" in str(exit_info.value.code)
    bench.require_peers(bench.parse_args(["--servers", "reference"]))  # the reference alone needs no Gradio


def test_mcp_vs_sdk_exits_non_zero_naming_the_mcp_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("mcp_vs_sdk", monkeypatch)
    without(monkeypatch, "mcp")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--servers", "fastmcp"])
    message = str(exit_info.value.code)
    assert "the official MCP SDK client, which is not installed" in message and "pip install" in message


def test_mcp_vs_sdk_needs_gradio_only_for_its_gradio_server(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("mcp_vs_sdk", monkeypatch)
    without(monkeypatch, "gradio")
    with pytest.raises(SystemExit, match="--servers fastmcp"):
        bench.require_peers(bench.parse_args([]))
    bench.require_peers(bench.parse_args(["--servers", "fastmcp"]))


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


SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))
# Each script run as `python bench/NAME.py --help` would be (`__main__`, bench/ first on sys.path), all in
# one process: the imports they share (torch, pandas, qbench) load once, not once per script (~15 s of CPU)
HELP_ALL = """
import contextlib, io, json, runpy, sys
bench, answers = sys.argv[1], {}
sys.path.insert(0, bench)
for name in sys.argv[2:]:
    out, err, code = io.StringIO(), io.StringIO(), 0
    sys.argv = [f"{bench}/{name}", "--help"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    except BaseException as error:
        code = 1
        err.write(f"{type(error).__name__}: {error}")
    answers[name] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:]}
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def help_answers() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", HELP_ALL, str(BENCH), *SCRIPTS], capture_output=True,
                          text=True, timeout=300, cwd=BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    answers: dict[str, dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return answers


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_imports_and_answers_help(script: str, help_answers: dict[str, Any]) -> None:
    """`--help` loads each benchmark's imports (a renamed module fails here) and runs nothing."""
    answer = help_answers[script]
    assert answer["code"] == 0, answer["stderr"]
    assert "usage:" in answer["stdout"]


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
    assert code == 0, (figures, out.with_suffix(".server.log").read_text()[-3000:])
    soak, shed, unbounded, vanish = (figures[k] for k in ("soak", "shed", "unbounded", "vanish"))
    assert soak["requests"] > 0 and soak["ok"] == soak["requests"]
    assert soak["server_mb_end"] > 0 and soak["generator_mb_end"] > 0
    assert shed["queue_full"] > 0 and shed["waiting_max"] <= shed["max_size"]
    assert unbounded["waiting_max"] > shed["max_size"]  # no max_size: the queue grows past it
    assert unbounded["drain_to_zero_s"] >= 0
    assert vanish["at_vanish"]["qbench_sessions"] >= 1  # they were there when they vanished
    assert vanish["after"] == {"qbench_running_jobs": 0, "qbench_sessions": 0, "qbench_events_live": 0}
    assert vanish["serves_after"] is True and vanish["cut"] == 0
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
    every = result["all_gaps"]  # the run's ITL over every gap, qbench's histograms against the server's
    assert every["gaps"] == {"qbench": 24.0, "server": 24.0}
    assert abs(every["p50"]["diff_s"]) < 0.005 and "ITL p99" in bench.render(result)
    for name in ("p50", "p90", "p99"):  # the histograms' figure against qbench's exact gaps: within 0.5%
        assert every[name]["qbench_s"] == pytest.approx(every[name]["qbench_exact_s"], rel=0.005)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="--pin needs Linux and 2 cores")
def test_token_timing_pinned_gives_the_cores_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """--pin: the server on one core, qbench on another, for the run only: this process's cores after
    are the ones it had (a test worker pinned to one core would slow every test after it)."""
    bench = load_bench("token_timing", monkeypatch)
    before = os.sched_getaffinity(0)
    result = bench.measure(users=2, requests=4, max_tokens=4, pinned=True)
    assert (result["joined"], result["token_mismatches"], result["pinned"]) == (4, 0, True)
    assert os.sched_getaffinity(0) == before


def test_gpu_serving_exits_non_zero_naming_gradio_or_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("gpu_serving", monkeypatch)
    without(monkeypatch, "gradio")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--device", "cpu", "--gradio"])
    assert exit_info.value.code not in (0, None)
    message = str(exit_info.value.code)
    assert "gradio is not installed" in message and "leave out --gradio" in message
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="CUDA is not available.*--device cpu"):
            bench.main(["--device", "cuda"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--presets", "video"])


@pytest.mark.slow
@pytest.mark.timeout(660)  # past the 600 s the dry run itself may take (subprocess.run below)
def test_gpu_all_dry_run_on_the_cpu(tmp_path: Path) -> None:
    """bench/gpu_all.sh, as the GPU session runs it, at toy size on the CPU: every step of the list runs
    (the CUDA tests skip their CUDA cases), the summary names each one, and the archive holds each log,
    the served rows and the py-spy profile, so the GPU session spends its time measuring."""
    import os
    import tarfile

    out = tmp_path / "out"
    steps = ["facts", "cuda-tests", "serving", "serving-b64", "batching", "profile", "eager", "compile",
             "sweep", "gradio-diagnosis"]  # parts 1 and 2 (part 3: tests/test_bench_ceiling.py)
    argv = ["bash", str(BENCH / "gpu_all.sh"), "--device", "cpu", "--dry-run", "--out", str(out),
            "--steps", ",".join(steps)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=BENCH.parent,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = (out / "gpu-all-partall-summary.md").read_text()
    for step in steps:
        assert f"| {step} | ok |" in summary, summary
    assert "reference  image  float32" in summary and "gradio 6   image" in summary
    assert "MainThread" in summary and "served " in summary and "winner:" in summary
    assert "of what its forward passes could serve back to back" in summary  # the device figures
    with tarfile.open(out / "gpu-all-partall.tar.gz") as tar:
        names = {Path(n).name: n for n in tar.getnames()}
        assert {f"{s}.log" for s in steps} | {"spy.txt", "gpu_serving.json", "summary.md"} <= set(names)
        rows = json.loads(tar.extractfile(names["gpu_serving.json"]).read())  # type: ignore[union-attr]
        serving_log = tar.extractfile(names["serving.log"]).read().decode()  # type: ignore[union-attr]
    # the serving step's rows (tiny ViT, B 4, 32 requests from 8 distinct images; its 120 s window only a
    # cap: it ends on the count, so it measures some however busy the box): every column is measured, GPU
    # busy absent on a CPU
    (row,) = [r for r in rows if r["server"] == "reference"]
    assert row["dtype"] == "float32" and row["errors"] == 0
    assert row["forward_ips"] > 0 and row["prep_ips"] > 0 and row["served_ips"] > 0
    assert row["gpu_busy"] is None and row["efficiency"] == pytest.approx(row["served_ips"] / row["prep_ips"])
    assert row["drift"] > 0
    assert "device cpu, size tiny" in serving_log and "reference  image  float32     4" in serving_log
    assert sorted(p.name for p in out.iterdir()) == ["gpu-all-partall-summary.md", "gpu-all-partall.tar.gz"]


@pytest.mark.slow
@pytest.mark.timeout(660)
def test_gpu_all_part_4_dry_run_measures_decode_and_graphs_against_the_baseline(tmp_path: Path) -> None:
    """Part 4 (issue 46) at toy size on the CPU: the device tests, bench/device_work.py's decode cpu vs
    device and forward eager vs graphs rows at the same batch, and the image preset served four ways
    (baseline, decode: device, cuda_graphs, both), each with its served line."""
    import os
    import tarfile

    out = tmp_path / "out"
    argv = ["bash", str(BENCH / "gpu_all.sh"), "--device", "cpu", "--dry-run", "--out", str(out),
            "--part", "4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=BENCH.parent,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = (out / "gpu-all-part4-summary.md").read_text()
    steps = ["device-tests", "device-work", "serve-baseline", "serve-decode-device", "serve-cuda-graphs",
             "serve-both"]
    for step in steps:
        assert f"| {step} | ok |" in summary, summary
    rows = ("decode cpu    B   4:", "decode device B   4:", "forward eager  B   3:", "forward graphs B   4:")
    for row in rows:
        assert row in summary, summary
    assert "decode: cpu, no graphs: served " in summary and "{'decode': 'device'}: served " in summary
    assert "{'cuda_graphs': 8}: served " in summary
    assert "{'decode': 'device', 'cuda_graphs': 8}: served " in summary
    assert "errors 0" in summary and " passed" in summary
    with tarfile.open(out / "gpu-all-part4.tar.gz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {f"{s}.log" for s in steps} | {"device_work.json", "image-decode-device.yaml"} <= names


def test_gpu_all_picks_the_torchvision_wheel_built_for_the_machines_torch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    bench = load_bench("gpu_all", monkeypatch)
    for version, torch_pin in (("0.26.0", "2.11.0"), ("0.28.0", "2.13.0")):
        with zipfile.ZipFile(tmp_path / f"torchvision-{version}-cp312-cp312-linux_x86_64.whl", "w") as wheel:
            wheel.writestr(f"torchvision-{version}.dist-info/METADATA",
                           f"Name: torchvision\nVersion: {version}\nRequires-Dist: numpy\n"
                           f"Requires-Dist: torch (=={torch_pin})\n")
    assert bench.torchvision_wheel(tmp_path, "2.13.0+cu130").name.startswith("torchvision-0.28.0")
    assert bench.torchvision_wheel(tmp_path, "2.11.0").name.startswith("torchvision-0.26.0")
    assert bench.torchvision_wheel(tmp_path, "2.12.0") is None


def test_gpu_all_rejects_an_unknown_step(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_bench("gpu_all", monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--steps", "serving,warp"])
    assert exit_info.value.code == 2 and "unknown step(s) warp" in capsys.readouterr().err


def test_gpu_all_thread_load_and_top_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """py-spy's raw format: 100 samples a second of an active thread = one core busy."""
    bench = load_bench("gpu_all", monkeypatch)
    raw = tmp_path / "spy.txt"
    raw.write_text("thread (1): MainThread;main (a.py:1);loop (a.py:2) 150\n"
                   "thread (2): AnyIO worker thread;run (b.py:1);forward (m.py:9) 300\n"
                   "thread (3): AnyIO worker thread;run (b.py:1);forward (m.py:9) 100\n"
                   "not a stack line\n")
    load = bench.thread_load(raw, seconds=2).splitlines()
    assert load == ["AnyIO worker thread (2 thread(s)): 2.00 cores busy",
                    "MainThread (1 thread(s)): 0.75 cores busy"]
    top = bench.top_frames(raw).splitlines()
    assert top[0].split() == ["72.7%", "forward", "(m.py:9)"] and top[1].split()[0] == "27.3%"


def test_vs_hf_perftest_exits_non_zero_naming_its_venv(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    bench = load_bench("vs_hf_perftest", monkeypatch)
    without(monkeypatch, "hf_perftest")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--hf-env", str(tmp_path / "absent")])
    message = str(exit_info.value.code)
    assert exit_info.value.code not in (0, None)
    assert "hf-perftest, which is not installed" in message and "--setup" in message
    assert "uv pip install" in message and "hf-perftest==" in message and "gradio==6.31.0" in message


def test_vs_hf_perftest_reads_server_phases_when_the_records_carry_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without `server_*_s` columns the table says so; with them it gives qbench's p50, the ratio to
    hf-perftest's and whether they agree (5% or 1 ms)."""
    import pandas as pd

    bench = load_bench("vs_hf_perftest", monkeypatch)
    base = {"outcome": ["ok", "ok", "ok", "error"], "warmup": [False, False, False, False],
            "sent_at_s": [0.0, 1.0, 2.0, 3.0], "joined_at_s": [0.001, 1.002, 2.003, None],
            "completed_at_s": [0.010, 1.020, 2.030, 3.5]}
    pd.DataFrame(base).to_parquet(tmp_path / "plain.parquet")
    plain = bench.record_figures(tmp_path / "plain.parquet")
    assert plain.client_p50 == pytest.approx(20.0) and plain.join_p50 == pytest.approx(2.0)
    assert set(plain.phases.values()) == {None}
    phases = {"server_queue_wait_s": [0.001, 0.0012, 0.0014, None], "server_fn_s": [0.1, 0.2, 0.3, None]}
    pd.DataFrame({**base, **phases}).to_parquet(tmp_path / "phases.parquet")
    carried = bench.record_figures(tmp_path / "phases.parquet")
    assert carried.phases["queue_wait"] == pytest.approx(1.2)
    assert carried.phases["fn_call"] == pytest.approx(200)
    assert carried.phases["preprocess"] is None
    carried.traces = {"queue_wait": 1.5, "fn_call": 230.0}  # the same events, read the way hf-perftest does
    theirs = bench.Figures(25.0, 40.0, {"queue_wait": 1.5, "fn_call": 230.0, "preprocess": 0.4})
    text = bench.table([bench.Row("echo_text", 1, theirs, plain), bench.Row("echo_text", 1, theirs, carried)])
    assert text.count(bench.NO_PHASES) == 3  # queue_wait, fn_call, preprocess of the plain records
    assert text.count("not in qbench's records") == 1  # preprocess, where the others are carried
    assert "queue_wait p50" in text and text.count("agree") == 1  # 1.2 ms vs 1.5: within 1 ms
    assert text.count("DIFFER") == 1 and " 0.87 " in text  # 200 ms vs 230: neither within 5% nor 1 ms


@pytest.mark.slow
def test_vs_hf_perftest_dry_run(tmp_path: Path) -> None:
    """bench/vs_hf_perftest.py at toy size when hf-perftest's venv is there (`--setup` builds it; CI has
    none; ~40-80 s on 2 shared cores, most of it Gradio starting): both tools measured on the same echo
    app, qbench's records read, the table printed."""
    bench_env = BENCH.parent / ".bench-envs" / "hf-perftest" / "bin" / "python"
    if not bench_env.exists():
        pytest.skip("hf-perftest's venv is absent (.venv/bin/python bench/vs_hf_perftest.py --setup)")
    out = tmp_path / "figures.json"
    argv = [sys.executable, str(BENCH / "vs_hf_perftest.py"), "--apps", "echo_text", "--tiers", "1",
            "--rounds", "3", "--repeats", "1", "--json", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=BENCH.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["hf"]["requests"] == 3 and row["qbench"]["requests"] == 3
    assert row["hf"]["phases"]["fn_call"] is not None and row["qbench"]["traces"]["fn_call"] is not None
    assert "client p50" in done.stdout and "client-only p50" in done.stdout


def test_end_of_run_generates_a_run_folder_as_the_runner_leaves_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """bench/end_of_run.py's records: every request once, read back as the runner reads them, Gradio-like
    phases in order, a few % errors of several kinds, two endpoints, the warm-up window."""
    from qbench.run.records.schema import read_jsonl
    from qbench.run.results.run_info import RunInfo
    from qbench.run.scenario.schema import parse_scenario

    bench = load_bench("end_of_run", monkeypatch)
    folder = bench.generate(tmp_path / "run", 4000, rate=1000.0, seed=1, chunk=1500)
    records = read_jsonl(folder / "records.jsonl")
    assert sorted(r.request_id for r in records) == list(range(4000))
    info = RunInfo.from_dict(json.loads((folder / "run.json").read_text()))
    assert parse_scenario(info.scenario).load.rate == 1000.0 and info.server["version"] == "6.31.0"
    assert {r.endpoint for r in records} == {"chat", "embed"} and 0 < sum(r.warmup for r in records) < 4000
    errors = [r for r in records if not r.ok]
    assert 0.01 < len(errors) / len(records) < 0.06
    assert {r.error_kind for r in errors} >= {"queue_full", "server_error", "timeout"}
    for r in records:
        assert r.sent_at_s is not None and r.completed_at_s is not None and r.intended_at_s <= r.sent_at_s
        if r.ok:
            assert r.sent_at_s < r.joined_at_s < r.started_at_s < r.completed_at_s  # type: ignore[operator]
            assert (r.first_output_at_s is not None) == (r.endpoint == "chat") and r.event_id
    assert [r.completed_at_s for r in records[:1500]] == sorted(r.completed_at_s for r in records[:1500])


def test_end_of_run_at_reduced_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The four steps at 2,000 records (the README's figures come from 100k records and more): a row
    each, the end of run wrote what the runner writes, each phase is timed, --check fails over the
    targets only."""
    bench = load_bench("end_of_run", monkeypatch)
    out = tmp_path / "rows.json"
    keep = tmp_path / "runs"
    assert bench.main(["--records", "2000", "--keep", str(keep), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["records"], r["step"]) for r in rows] == [(2000, s) for s in ("finish", "summary", "report",
                                                                            "compare")]
    assert rows[1]["same"] is True  # the summary from records.parquet's columns: summary.json's figures
    for row in rows:
        assert 0 < row["seconds"] < 600 and 50 < row["peak_mib"] < 6000
        assert row["mib_per_100k"] == pytest.approx(row["peak_mib"] * 50)
    phases = [p["phase"] for p in rows[0]["phases"]]
    # the spill is the run's (its peak is not the end's: reset after it), then the end's own steps
    assert phases == ["spill (the run's)", "records.parquet", "summary", "diagnosis", "app notes", "total"]
    from qbench.run.records.schema import read_jsonl

    summary = json.loads((keep / "a-2000" / "summary.json").read_text())
    measured = [r for r in read_jsonl(keep / "a-2000" / "records.jsonl") if not r.warmup]
    assert summary["requests"] == len(measured) and summary["errors"] == sum(not r.ok for r in measured)
    assert (keep / "a-2000" / "report.html").exists() and (keep / "b-2000" / "records.parquet").exists()
    table = capsys.readouterr().out
    assert "finish" in table and "report" in table and "compare" in table and "extrapolated" not in table
    too_big = [bench.Row(3_600_000, "finish", 300.0, 9000.0)]
    assert bench.over_targets(too_big) == ["finish at 3,600,000 records: 300 s, 9000 MiB "
                                           "(target <= 120 s, <= 500 MiB)"]
    assert bench.over_targets([bench.Row(3_600_000, "report", 30.0, 400.0)]) == []


def test_end_of_run_profile_maps_the_memory_of_each_phase(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """`--profile`: each phase of the end of run with its Python heap and Arrow pool, and the biggest
    allocation sites after the seal: none of them the records as objects (qbench/run/records/schema.py), which
    the end of a run no longer makes."""
    bench = load_bench("end_of_run", monkeypatch)
    out = tmp_path / "rows.json"
    assert bench.main(["--records", "1500", "--steps", "finish", "--profile", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["step"] == "finish" and row["sites"]
    assert not any("qbench/run/records/schema.py" in site["site"] for site in row["sites"]), row["sites"]
    parquet = next(p for p in row["phases"] if p["phase"] == "records.parquet")
    assert parquet["arrow_peak_mib"] > 0 and parquet["py_peak_mib"] >= parquet["py_held_mib"] > 0


def test_spill_seal_seals_a_spill_of_a_run_in_finishing_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/spill_seal.py's seal step at 3,000 records x 2: the spill made as the generator makes it,
    sealed in a fresh process into every record once, in request order; the costs are printed."""
    bench = load_bench("spill_seal", monkeypatch)
    eor = load_bench("end_of_run", monkeypatch)
    from qbench.run.records.schema import read_parquet, write_parquet

    records, _ = eor.chunk_records(np.random.default_rng(3), 0, 3_000, 0.0, 1000.0, 1.0, 0.5)
    records.sort(key=lambda r: r.request_id)
    (tmp_path / "run").mkdir()
    write_parquet(records, tmp_path / "run" / "records.parquet")
    monkeypatch.setattr(bench, "CHUNK", 1_000)
    assert bench.main(["seal", "--run", str(tmp_path / "run"), "--copies", "2", "--tmp", str(tmp_path),
                       "--keep", str(tmp_path / "kept")]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert row["records"] == 6_000 and row["seal_s"] > 0 and row["seal_peak_mib"] > 50
    assert row["loop_us_per_record"] > 0 and row["thread_us_per_record"] > 0
    back = read_parquet(tmp_path / "kept" / "records-2.parquet")
    assert [r.request_id for r in back] == list(range(6_000))
    assert [r.latency_s for r in back[:3_000]] == [r.latency_s for r in records]


def test_live_memory_at_reduced_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """bench/live_memory.py's two lengths in seconds (RESULTS.md's figures come from 10 and 30 minutes):
    a row each with the run's requests, its RSS over the load and its peak from the kernel, and the
    longer run's peak against the shorter's."""
    bench = load_bench("live_memory", monkeypatch)
    out = tmp_path / "rows.json"
    assert bench.main(["--minutes", "0.05", "0.1", "--rate", "40", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["minutes"] for r in rows] == [0.05, 0.1]
    for row in rows:
        assert row["requests"] >= 0.5 * row["rate"] * row["minutes"] * 60  # its load ran
        assert 30 < row["rss_end_of_load_mib"] <= row["peak_mib"] < 2000
    printed = capsys.readouterr().out
    assert "| minutes | rate | requests |" in printed and "peak RSS: 0.1 min" in printed
    shrunk = [bench.Row(**{**rows[0], "peak_mib": 100.0}), bench.Row(**{**rows[1], "peak_mib": 130.0})]
    _, problems = bench.verdict(shrunk)
    assert problems and "+30.0%" in problems[0]  # a peak that grows with the length misses the bar
