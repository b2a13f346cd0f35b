"""Settings validation: clear errors naming the source, key, value and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference_server.http.server_state import build_functions
from reference_server.launch import ServeOptions, settings_from_options
from reference_server.settings import (
    SettingsError,
    load_preset,
    load_settings,
    parse_settings,
    synthetic_settings,
    with_overrides,
)


def test_defaults_match_gradio() -> None:
    s = synthetic_settings()
    fn = s.functions[0]
    assert (fn.concurrency_limit, fn.batch, fn.max_batch_size, fn.batch_wait_ms) == ("default", False, 4, 0)
    assert (s.queue.default_concurrency_limit, s.queue.max_size, s.queue.status_update_rate) == (
        1,
        None,
        "auto",
    )
    assert (s.launch.max_threads, s.launch.host) == (40, "127.0.0.1")
    assert s.heartbeat_interval_s == 15 and s.show_error is False
    assert s.resolved_limit(fn) == 1
    assert fn.group_id == "fn:echo"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"functions": []}, "functions = []: List should have at least 1 item"),
        (
            {"functions": [{"api_name": "a", "workload": "echo", "concurrency_limit": 0}]},
            "functions.0.concurrency_limit = 0: must be >= 1",
        ),
        (
            {"functions": [{"api_name": "a", "workload": "echo", "max_batch_size": 0}]},
            "functions.0.max_batch_size = 0",
        ),
        ({"functions": [{"api_name": "a b", "workload": "echo"}]}, "functions.0.api_name = 'a b'"),
        ({"functions": [{"api_name": "a", "workload": "echo", "bogus": 1}]}, "functions.0.bogus = 1"),
        ({"functions": [{"api_name": "a", "workload": "echo"}] * 2}, "'a' is used twice"),
        (
            {"functions": [{"api_name": "a", "workload": "echo"}], "queue": {"max_size": -1}},
            "queue.max_size = -1",
        ),
        (
            {"functions": [{"api_name": "a", "workload": "echo"}], "queue": {"status_update_rate": 0}},
            "status_update_rate",
        ),
        ({"functions": [{"api_name": "a", "workload": "echo"}], "device": "tpu"}, "device = 'tpu'"),
    ],
)
def test_invalid_settings_name_key_and_value(raw: dict[str, object], expected: str) -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings(raw, "server.yaml")
    assert "server.yaml" in str(info.value)
    assert expected in str(info.value)


def test_workload_errors_name_the_function() -> None:
    with pytest.raises(SettingsError, match=r"functions\[0\] \(a\): unknown workload 'nope'"):
        build_functions(parse_settings({"functions": [{"api_name": "a", "workload": "nope"}]}))
    bad_param = {"functions": [{"api_name": "a", "workload": "sleep", "params": {"base_ms": -1}}]}
    with pytest.raises(SettingsError, match=r"params.base_ms = -1"):
        build_functions(parse_settings(bad_param))
    unknown_param = {"functions": [{"api_name": "a", "workload": "sleep", "params": {"wat": 1}}]}
    with pytest.raises(SettingsError, match=r"params.wat = 1"):
        build_functions(parse_settings(unknown_param))


def test_generator_with_batch_is_refused() -> None:
    raw = {"functions": [{"api_name": "g", "workload": "stream", "batch": True}]}
    with pytest.raises(SettingsError, match=r"functions\[0\].batch = true: .* generator"):
        build_functions(parse_settings(raw))


def test_files_and_presets(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("functions:\n  - {api_name: a, workload: echo, concurrency_limit: null}\n")
    assert load_settings(path).functions[0].concurrency_limit is None
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")
    path.write_text("functions: [unclosed\n")
    with pytest.raises(SettingsError, match="not valid YAML"):
        load_settings(path)
    path.write_text("- a list\n")
    with pytest.raises(SettingsError, match="expected a mapping"):
        load_settings(path)
    for name in ("echo", "sleep", "mixed"):
        build_functions(load_preset(name))
    with pytest.raises(SettingsError, match="unknown preset 'nope'; expected one of: .*echo"):
        load_preset("nope")


def test_overrides_and_cli_options(monkeypatch: pytest.MonkeyPatch) -> None:
    s = with_overrides(synthetic_settings(), {"queue.max_size": 3, "launch.max_threads": 2}, "flags")
    assert (s.queue.max_size, s.launch.max_threads) == (3, 2)
    with pytest.raises(SettingsError, match="flags: launch.max_threads = 0"):
        with_overrides(s, {"launch.max_threads": 0}, "flags")
    monkeypatch.setenv("QBENCH_ADMIN_TOKEN", "secret")
    opts = ServeOptions(preset="sleep", port=0, max_size=5, default_concurrency_limit=2, model="tiny")
    s = settings_from_options(opts)
    assert (s.launch.port, s.queue.max_size, s.queue.default_concurrency_limit) == (0, 5, 2)
    assert s.admin_token == "secret"
    assert all("model" not in f.params for f in s.functions)  # synthetic kinds take no model
    with pytest.raises(SettingsError, match="not both"):
        settings_from_options(ServeOptions(preset="echo", config=Path("x.yaml")))


def test_config_hash_tracks_settings_not_token() -> None:
    a = synthetic_settings()
    assert a.config_hash() == synthetic_settings(admin_token="t").config_hash()
    assert a.config_hash() != synthetic_settings(queue={"max_size": 1}).config_hash()


def test_on_cuda_knobs_apply_only_on_cuda() -> None:
    from reference_server.settings import for_device, load_preset

    image = load_preset("image")
    assert image.functions[0].max_batch_size == 8
    assert for_device(image, "cpu") is image
    cuda = for_device(image, "cuda")
    assert cuda.functions[0].max_batch_size == 32 and cuda.functions[0].concurrency_limit == 1
    text = for_device(load_preset("text"), "cuda")
    assert [f.max_batch_size for f in text.functions] == [32, 16]  # embed has no on_cuda


def test_on_cuda_rejects_what_it_cannot_change() -> None:
    from reference_server.settings import SettingsError, parse_settings

    raw = {"functions": [{"api_name": "a", "workload": "echo", "on_cuda": {"params": {"size": "tiny"}}}]}
    with pytest.raises(SettingsError, match="on_cuda"):
        parse_settings(raw, "t.yaml")
