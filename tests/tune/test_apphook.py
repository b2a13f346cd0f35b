"""qbench.tune.apphook: the startup hook's environment, its chaining of an existing sitecustomize, its
record read back, and the advice as a change to the app's own settings."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qbench.tune.apphook import HOOK_FILE, HookRecord, app_change, hook_env, read_hook_record


def test_the_hook_imports_nothing_of_qbench() -> None:
    tree = ast.parse(HOOK_FILE.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [n for n in names if n.startswith("qbench")]


def test_the_hook_chains_the_environments_own_sitecustomize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITECUSTOMIZE_RAN'] = '1'\n")
    monkeypatch.setenv("PYTHONPATH", str(own))
    env = dict(os.environ)
    env.update(hook_env({"concurrency_limit": 2}, 7999, ["respond"], tmp_path / "point"))
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "point" / "qbench-hook"), str(own)]
    code = "import os, sys; print(os.environ.get('OWN_SITECUSTOMIZE_RAN'), 'gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]  # chained, and gradio is not imported by the hook
    record = read_hook_record(tmp_path / "point")
    assert record is not None and not record.launched  # no Blocks.launch() in that process


def test_no_record_reads_as_none(tmp_path: Path) -> None:
    assert read_hook_record(tmp_path) is None
    (tmp_path / "hook-record.json").write_text("{not json")
    assert read_hook_record(tmp_path) is None


def record(major: str, app: dict[str, object], queue_app: dict[str, object]) -> HookRecord:
    return HookRecord.from_dict(json.loads(json.dumps({
        "launched": True, "gradio_version": major, "queue": {"app": queue_app},
        "launch": {"app": {"server_port": 7860}},
        "events": [{"fn_index": 0, "api_name": "respond", "chosen": True, "app": app}],
    })))


def test_the_advice_is_a_change_to_the_apps_own_settings() -> None:
    hook = record("4.44.1", {"concurrency_limit": "default"}, {"default_concurrency_limit": 4})
    assert app_change(hook, {"concurrency_limit": 8}) == [
        "your app (Gradio 4.44.1): default_concurrency_limit=4 -> recommended concurrency_limit=8 "
        "on `respond`"]
    own_limit = record("6.31.0", {"concurrency_limit": 2}, {"default_concurrency_limit": 4})
    assert "concurrency_limit=2 -> recommended concurrency_limit=8" in app_change(
        own_limit, {"concurrency_limit": 8})[0]
    three = record("3.50.2", {"batch": False}, {"concurrency_count": 1, "max_size": None})
    assert app_change(three, {"concurrency_count": 4}) == [
        "your app (Gradio 3.50.2): concurrency_count=1 -> recommended concurrency_count=4"]


def test_launch_knobs_are_advised_as_a_change_to_the_apps_launch() -> None:
    hook = record("6.31.0", {"concurrency_limit": "default"}, {"default_concurrency_limit": 4})
    hook.launch["app"].update(ssr_mode=True, num_workers=None)
    assert app_change(hook, {"num_workers": 2, "ssr_mode": True}) == [
        "your app (Gradio 6.31.0): launch(num_workers=default, ssr_mode=True) -> recommended "
        "launch(num_workers=2, ssr_mode=True)"]
