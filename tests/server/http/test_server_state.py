"""What the lifespan builds once (reference_server.http.server_state): functions from settings (errors
naming the function), the device "auto" resolves to, the state's files, config and live changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference_server.http.server_state import ServerState, build_functions, resolve_device
from reference_server.settings import SettingsError, synthetic_settings


def test_functions_are_built_in_order_and_a_bad_param_names_the_function() -> None:
    settings = synthetic_settings(functions=[{"api_name": "a", "workload": "echo"},
                                             {"api_name": "b", "workload": "sleep"}])
    functions = build_functions(settings)
    assert [(f.index, f.settings.api_name, f.workload.kind) for f in functions] == [(0, "a", "echo"),
                                                                                    (1, "b", "sleep")]
    bad = synthetic_settings(functions=[{"api_name": "a", "workload": "echo"},
                                        {"api_name": "slow", "workload": "sleep", "params": {"nope": 1}}])
    with pytest.raises(SettingsError, match=r"^functions\[1\] \(slow\): "):
        build_functions(bad)


def test_a_batched_generator_is_refused_as_gradio_refuses_it() -> None:
    settings = synthetic_settings(functions=[{"api_name": "s", "workload": "stream", "batch": True}])
    with pytest.raises(SettingsError, match=r"\.batch = true: workload 'stream' is a generator"):
        build_functions(settings)


def test_auto_is_the_cpu_for_workloads_that_never_touch_torch() -> None:
    assert resolve_device(synthetic_settings()) == "cpu"
    assert resolve_device(synthetic_settings(device="cpu")) == "cpu"


def test_the_state_keeps_its_files_builds_its_config_and_applies_changes(tmp_path: Path) -> None:
    state = ServerState.create(synthetic_settings(), file_dir=tmp_path)
    try:
        assert state.store.root == tmp_path and state.pool is None and state.torch_memory() is None
        assert [d.get("api_name") for d in state.config["dependencies"]] == ["echo"]
        changed = synthetic_settings(queue={"max_size": 3})
        state.apply(changed)
        assert state.settings is changed and state.queue.settings is changed
        state.start_pool()  # echo takes no image: no decode processes
        assert state.pool is None
    finally:
        state.close()
    own = ServerState.create(synthetic_settings())
    folder = Path(own._tmp.name)
    assert folder.is_dir()
    own.close()
    assert not folder.exists()  # a temporary file folder goes with the state


def test_the_lifespan_raises_the_collectors_thresholds_while_serving_and_restores_them() -> None:
    import asyncio
    import gc

    from reference_server.http.app import GC_THRESHOLDS, build_app

    app = build_app(synthetic_settings())
    before = gc.get_threshold()

    async def serve() -> tuple[int, ...]:
        async with app.router.lifespan_context(app):
            return gc.get_threshold()

    assert asyncio.run(serve()) == GC_THRESHOLDS != before
    assert gc.get_threshold() == before


@pytest.mark.parametrize("resume_gc", [True, False])
def test_the_lifespan_resumes_a_paused_collector_only_when_asked(resume_gc: bool) -> None:
    """launch.serve pauses the collector for the start-up and its app resumes it once ready; an app run
    in a test's thread (resume_gc False) leaves the caller's collector as it found it."""
    import asyncio
    import gc

    from reference_server.http.app import build_app

    app = build_app(synthetic_settings(), resume_gc=resume_gc)

    async def serve() -> bool:
        async with app.router.lifespan_context(app):
            return gc.isenabled()

    gc.disable()
    try:
        assert asyncio.run(serve()) is resume_gc
    finally:
        gc.enable()
