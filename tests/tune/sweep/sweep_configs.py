"""A sweep's config on the base test server (predict, concurrency_limit 1, max_batch_size 4), for the
tests of the sweep's modules."""

from __future__ import annotations

from pathlib import Path

from qbench.tune.sweep.config import SweepConfig, SweepOptions, build_config

from ..conftest import write_scenario


def config_for(tmp_path: Path, *grid: str) -> SweepConfig:
    path = write_scenario(tmp_path)  # the base server: predict, concurrency_limit 1, max_batch_size 4
    return build_config(SweepOptions(str(path), grid=list(grid), out_root=str(tmp_path / "r")))
