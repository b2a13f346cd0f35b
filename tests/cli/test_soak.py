"""`qbench soak`'s command: the file cache an app it starts is watched in."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.cli.soak import own_cache


def test_an_app_soak_starts_gets_a_cache_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --app, the app's Gradio cache is a folder in its work folder (<tmp>/gradio holds every app's
    files on the machine: ~7,000 after a run of this suite, walked at each sample: a busy box's soak got
    6 samples of 36), unless --cache-dir or the environment's GRADIO_TEMP_DIR names one."""
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    assert own_cache(None, tmp_path / "app") == tmp_path / "app" / "gradio-cache"
    assert own_cache(tmp_path / "mine", tmp_path / "app") is None
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "env"))
    assert own_cache(None, tmp_path / "app") is None
