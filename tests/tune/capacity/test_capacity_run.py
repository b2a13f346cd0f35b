"""How `qbench capacity` makes its CapacityConfig from its options and the scenario (capacity_run)."""

from __future__ import annotations

from pathlib import Path

import yaml

from qbench.tune.capacity.capacity_run import capacity_config


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
