"""The limit diagnosis on real runs of the reference server's CPU stand-in of a GPU server (workload
image-ideal: the image preset's request path before an "ideal accelerator", a GIL-free wait of a set
length): a slow device is named as the limit, and a fast device behind CPU-heavy decoding is the
per-request work; the summary's device figures (forward passes beside the served rate) match the stand-in's
known forward pass. The server runs in its own process (its /status CPU is its own), 6 closed-loop users
for 60 requests (a few seconds here; sized in seconds, a busy box's run of 6 s measured fewer than the
diagnosis needs to judge, and said nothing of the limit)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from qbench.run.pipeline import RunResult, run_scenario
from qbench.run.scenario.schema import parse_scenario
from qbench.tune.servers.server_process import start_reference_server


def standin_run(tmp_path: Path, device_ms: float, image: dict[str, object], requests: int = 60) -> RunResult:
    settings = {"device": "cpu", "functions": [{
        "api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": device_ms},
        "batch": False, "concurrency_limit": 1}],
        "launch": {"max_threads": 40, "decode_workers": 0, "front_ends": 0}}
    with start_reference_server(settings) as url:
        spec = parse_scenario({
            "name": "standin", "protocol": "gradio", "endpoint": {"api_name": "classify"},
            "payload": {"seed": 1, "variants": 4, "inputs": [{"image": image}]},
            "load": {"users": 6, "requests": requests, "warmup": 1, "timeout": 60}})
        result = run_scenario(spec, target=url, out_dir=tmp_path / f"run-{device_ms:g}", live=False)
    assert result.summary.errors == 0
    return result


def said(result: RunResult) -> list[str]:
    return [f"{f.kind}: {f.message}" for f in result.diagnosis if f.kind != "usage"]


def test_a_slow_device_is_the_limit(tmp_path: Path) -> None:
    """200 ms of device per request, small JPEGs: the device is busy ~95% of the run (it would once have
    been told to raise concurrency_limit or batch: queue_limit). 200, not 100: on a busy box the gaps
    between one request and the next (the decode, the messages, a wait for a core) took ~30% of 100 ms,
    and a device under 75% busy is not the limit."""
    result = standin_run(tmp_path, 200.0, {"width": 64, "height": 64, "format": "jpeg"})
    found = said(result)
    assert found and found[0].startswith("device: at its limit for 6 users"), found
    assert "the device is the limit (at " in found[0]
    assert "more concurrency or faster request handling will not help" in found[0]
    # the summary's device figures against the stand-in's known forward pass: 200 ms, one at a time
    device = result.summary.device
    assert device is not None and device.batch_size == 1.0 and device.gpu_busy is None  # no GPU here
    assert device.forward_ms is not None and 200.0 <= device.forward_ms < 260.0
    # back to back, at most 5 a second (each pass 200 ms or more); the mean pass, unlike the median, takes
    # a busy box's stretched ones (267 ms once: 3.7 a second)
    assert device.forward_rps is not None and 2.0 < device.forward_rps <= 5.0
    assert device.served_share is not None and 0.5 < device.served_share <= 1.0
    saved = json.loads((result.run_dir / "summary.json").read_text())["device"]
    assert saved["records"] == device.records == result.summary.completed_ok


def test_a_fast_device_behind_heavy_decoding_is_per_request_work(tmp_path: Path) -> None:
    """0.5 ms of device per request behind 1600x1200 PNGs to upload and decode: the server's own work.
    (Large enough that the queue's wait, ~5 decodes, stays well above what a busy box's load generator
    lags: a lag as long as the wait is flagged as the generator's, rightly, and hides the server's.)"""
    result = standin_run(tmp_path, 0.5, {"width": 1600, "height": 1200, "format": "png"})
    found = said(result)
    assert found and found[0].startswith("per_request_work: at its limit for 6 users"), found
    forward = re.search(r"the forward pass ([\d.]+) ms", found[0])  # 0.5 ms, a busy box's ~1-2 ms
    assert forward and float(forward.group(1)) < 10 and "the server's own work" in found[0], found[0]
    assert not any(s.startswith("device") for s in found)
    device = result.summary.device  # the forward pass ran a small share of the run: far from the device
    assert device is not None and device.served_share is not None and device.served_share < 0.2
