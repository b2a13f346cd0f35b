"""`qbench soak`'s command: the file cache an app it starts is watched in, the duration it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.cli.soak import SoakArgs, own_cache
from qbench.run.scenario.schema import load_scenario


def test_an_app_soak_starts_gets_a_cache_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --app, the app's Gradio cache is a folder in its work folder (<tmp>/gradio holds every app's
    files on the machine: ~7,000 after a run of this suite, walked at each sample: a busy box's soak got
    6 samples of 36), unless --cache-dir or the environment's GRADIO_TEMP_DIR names one."""
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    assert own_cache(None, tmp_path / "app") == tmp_path / "app" / "gradio-cache"
    assert own_cache(tmp_path / "mine", tmp_path / "app") is None
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "env"))
    assert own_cache(None, tmp_path / "app") is None


def test_a_soak_given_a_duration_holds_all_of_it() -> None:
    """--duration drops the scenario's request count (examples/torchserve/predict.yaml asks for 640
    requests: a soak of 120 s at 100 req/s ended after 6 s), unless --set gives one."""
    scenario = Path("examples/torchserve/predict.yaml")
    assert load_scenario(scenario).load.requests == 640
    held = load_scenario(scenario, SoakArgs(scenario=scenario, duration=120, rate=100).overrides())
    assert (held.load.requests, held.load.duration, held.load.rate) == (None, 120, 100)
    counted = SoakArgs(scenario=scenario, duration=120, set_=["load.requests=50"]).overrides()
    assert load_scenario(scenario, counted).load.requests == 50
    assert "load.requests" not in SoakArgs(scenario=scenario).overrides()
