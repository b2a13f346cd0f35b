"""`qbench serve` and `python -m reference_server`: ready line, serving, clean errors."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest


def start(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = re.match(r"reference server ready on (http://127\.0\.0\.1:\d+)$", line.strip())
        if match:
            return proc, match.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"server did not print its ready line (exit {proc.poll()})")


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-m", "qbench", "serve", "--preset", "echo", "--port", "0", "--max-size", "3"],
        [sys.executable, "-m", "reference_server", "--preset", "mixed", "--port", "0", "--max-size", "3"],
        [sys.executable, "-m", "qbench", "serve", "--preset", "echo", "--port", "0", "--max-size", "3",
         "--dtype", "float32", "--no-compile"],  # model flags parse (echo has no model to apply them to)
    ],
)
def test_serve_prints_ready_and_serves(argv: list[str]) -> None:
    proc, url = start(argv)
    try:
        assert httpx.get(f"{url}/config").json()["protocol"] == "sse_v3"
        assert httpx.get(f"{url}/status").json()["settings"]["queue"]["max_size"] == 3
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_bad_options_exit_2_with_a_clear_message() -> None:
    for argv in (
        [sys.executable, "-m", "qbench", "serve", "--preset", "nope"],
        [sys.executable, "-m", "reference_server", "--max-threads", "0"],
    ):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert "unknown preset 'nope'" in result.stderr or "launch.max_threads = 0" in result.stderr


def test_dtype_and_compile_flags_reach_only_the_model_workloads() -> None:
    from reference_server.launch import ServeOptions, settings_from_options
    from reference_server.settings import SettingsError

    settings = settings_from_options(ServeOptions(preset="text", dtype="float32", compile=True))
    assert all(fn.params["dtype"] == "float32" and fn.params["compile"] is True for fn in settings.functions)
    assert settings.functions[0].params["labels"] == ["negative", "positive"]  # the preset's others stay
    backend = settings_from_options(ServeOptions(preset="text", compile_backend="aot_eager"))
    assert {fn.params["compile"] for fn in backend.functions} == {"aot_eager"}  # the backend implies compile
    off = settings_from_options(ServeOptions(preset="text", compile=False, compile_backend="aot_eager"))
    assert {fn.params["compile"] for fn in off.functions} == {False}
    # qbench serve takes it as free text
    with pytest.raises(SettingsError, match="--compile-backend 'fast': expected one of inductor, aot_eager"):
        settings_from_options(ServeOptions(preset="text", compile_backend="fast"))
    sleep = settings_from_options(ServeOptions(preset="sleep", dtype="float32"))
    assert "dtype" not in sleep.functions[0].params
    assert settings_from_options(ServeOptions(preset="image")).functions[0].params["dtype"] == "auto"


def test_serve_pauses_the_collector_until_its_app_is_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up (imports, the model's load) runs with the collector paused, and the app is built to
    resume it once ready (its lifespan: tests/server/http/test_server_state.py)."""
    import gc

    from reference_server import launch
    from reference_server.settings import synthetic_settings

    seen: dict[str, bool] = {}

    def build_app(settings: object, file_dir: object = None, *, resume_gc: bool = False) -> object:
        seen.update(enabled=gc.isenabled(), resume_gc=resume_gc)
        raise SystemExit(0)

    monkeypatch.setattr(launch, "build_app", build_app)
    try:
        with pytest.raises(SystemExit):
            launch.serve(synthetic_settings())
    finally:
        gc.enable()
    assert seen == {"enabled": False, "resume_gc": True}
