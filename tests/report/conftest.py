"""Fixtures for report tests: the golden run, fabricated runs and a fabricated sweep."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from report_synth import simulate, write_run, write_sweep  # noqa: E402

DATA = Path(__file__).parent / "data"


@pytest.fixture
def golden_run(tmp_path: Path) -> Path:
    """The committed golden records (JSONL, as a run that died before writing Parquet) + run.json."""
    run = tmp_path / "golden"
    run.mkdir()
    shutil.copy(DATA / "golden_records.jsonl", run / "records.jsonl")
    shutil.copy(DATA / "golden_run.json", run / "run.json")
    return run


@pytest.fixture
def sim_run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "sim", simulate(n=300, max_queue=20, fail_every=40))


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("sweeps") / "sweep-synthetic")
