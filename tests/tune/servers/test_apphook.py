"""qbench.tune.servers.apphook: the startup hook's environment, its chaining of an existing sitecustomize, its
record read back, and the advice as a change to the app's own settings; the hook itself
(apphook/sitecustomize.py): what it sets in a 4.x and a 3.x app, and what it records."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from qbench.tune.servers.apphook import (
    HOOK_FILE,
    HOOK_FILES,
    HookRecord,
    app_change,
    hook_env,
    read_hook_record,
)
from tests.startup import FOLDER, with_startup
from tests.syntax import parse


@pytest.mark.parametrize("path", HOOK_FILES, ids=lambda p: p.name)
def test_the_hook_imports_nothing_of_qbench(path: Path) -> None:
    tree = parse(path)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [n for n in names if n == "qbench" or n.startswith("qbench.")]  # the app's env has no qbench
    siblings = {f.stem for f in HOOK_FILES}  # copied beside it: the only other files it may import
    assert not [n for n in names if n.startswith("qbench") and "." not in n and n not in siblings]


def test_the_batches_every_process_counted_are_summed_and_a_relaunch_starts_from_none(tmp_path: Path) -> None:
    """A LitServe app's inference workers each count the batches they ran in a file of their own
    (qbench_litserve_hook.py); the record read back has their sum. hook_env copies both hook files and
    clears the last launch's counts."""
    env = hook_env({"max_batch_size": 4}, 7999, None, tmp_path)
    assert sorted(p.name for p in (tmp_path / "qbench-hook").iterdir()) == sorted(p.name for p in HOOK_FILES)
    assert json.loads(env["QBENCH_HOOK"])["knobs"] == {"max_batch_size": 4}
    (tmp_path / "hook-record.json").write_text(json.dumps({"launched": True, "framework": "litserve"}))
    (tmp_path / "hook-record.json.batches.11.json").write_text(json.dumps({"/predict": {"4": 3, "1": 1}}))
    (tmp_path / "hook-record.json.batches.12.json").write_text(json.dumps({"/predict": {"4": 2, "3": 1}}))
    (tmp_path / "hook-record.json.batches.13.json").write_text("{half wri")  # being replaced: skipped
    record = read_hook_record(tmp_path)
    assert record is not None and record.framework == "litserve"
    assert record.batch_sizes == {"/predict": {4: 5, 1: 1, 3: 1}} and record.batch_processes == 2
    hook_env({"max_batch_size": 8}, 7999, None, tmp_path)
    assert not list(tmp_path.glob("hook-record.json*"))


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


def test_a_litserve_apps_advice_is_a_change_to_its_constructors() -> None:
    hook = HookRecord(launched=True, framework="litserve", litserve={
        "version": "0.2.19", "apis": [{"api_path": "/predict", "type": "BatchedAPI",
                                       "app": {"max_batch_size": 4, "batch_timeout": 0.01}}],
        "server": {"app": {"workers_per_device": 1}}})
    assert app_change(hook, {"max_batch_size": 16, "workers_per_device": 2}) == [
        "your app (LitServe 0.2.19): BatchedAPI(max_batch_size=4, batch_timeout=0.01) -> recommended "
        "BatchedAPI(max_batch_size=16, batch_timeout=0.01) at /predict",
        "your app (LitServe 0.2.19): LitServer(workers_per_device=1) -> recommended "
        "LitServer(workers_per_device=2)"]


def test_the_apps_own_queue_cap_is_read_from_its_code_not_the_points_knob() -> None:
    """Ray Serve's max_queued_requests (-1: none) and BentoML's max_concurrency, as the app's code sets
    them; a knob qbench set over them ("set", "effective") is not the app's."""
    def ray(*caps: int) -> HookRecord:
        return HookRecord(launched=True, framework="rayserve", rayserve={"deployments": [
            {"name": f"D{i}", "app": {"max_queued_requests": cap}, "effective": {"max_queued_requests": 9}}
            for i, cap in enumerate(caps)]})
    assert ray(57).own_queue_cap() == "max_queued_requests=57"
    assert ray(-1).own_queue_cap() == ""
    assert ray(-1, 20).own_queue_cap() == "D1's max_queued_requests=20"
    bento = HookRecord(launched=True, framework="bentoml", bentoml={"service": {
        "app": {"workers": 1, "max_concurrency": None}, "effective": {"max_concurrency": 64}}})
    assert bento.own_queue_cap() == ""
    bento.bentoml["service"]["app"]["max_concurrency"] = 32
    assert bento.own_queue_cap() == "max_concurrency=32"
    assert HookRecord(launched=True, framework="litserve").own_queue_cap() == ""


def test_knobs_the_launch_command_passes_itself_are_observed_not_set(tmp_path: Path) -> None:
    env = hook_env({"max_batch_size": 8, "batch_timeout": 0.1}, 7999, None, tmp_path, ["max_batch_size"])
    assert json.loads(env["QBENCH_HOOK"])["observe"] == ["max_batch_size"]


def test_launch_knobs_are_advised_as_a_change_to_the_apps_launch() -> None:
    hook = record("6.31.0", {"concurrency_limit": "default"}, {"default_concurrency_limit": 4})
    hook.launch["app"].update(ssr_mode=True, num_workers=None)
    assert app_change(hook, {"num_workers": 2, "ssr_mode": True}) == [
        "your app (Gradio 6.31.0): launch(num_workers=default, ssr_mode=True) -> recommended "
        "launch(num_workers=2, ssr_mode=True)"]


# ---------------------------------------------------------------- the hook's side (sitecustomize.py)
# In-process, on stand-ins with the shapes of Gradio's Blocks (4.x and later: BlockFunction objects in
# `fns`; 3.x: config dicts in `dependencies`); tests/gradio_versions runs the hook in real Gradio apps.


@pytest.fixture
def hook_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """sitecustomize.py loaded under a name of its own: without QBENCH_HOOK it installs nothing."""
    monkeypatch.delenv("QBENCH_HOOK", raising=False)
    monkeypatch.setitem(sys.modules, "gradio", SimpleNamespace(__version__="4.44.1"))
    spec = importlib.util.spec_from_file_location("qbench_hook_under_test", HOOK_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Fn4:
    """A 4.x BlockFunction's settings."""

    def __init__(self, api_name: str, *, batch: bool = False, limit: object = "default",
                 concurrency_id: str | None = None, queue: bool = True) -> None:
        self.api_name, self.batch, self.concurrency_limit = api_name, batch, limit
        self.concurrency_id = concurrency_id or api_name
        self.max_batch_size, self.queue, self.fn = 4, queue, print


def blocks4() -> type:
    """A fresh 4.x-shaped Blocks class (patch_blocks marks the class it wraps)."""

    class Blocks:
        def __init__(self, fns: list[Fn4]) -> None:
            self.fns = dict(enumerate(fns))
            self._queue = SimpleNamespace(default_concurrency_limit=1, max_size=None)
            self.calls: list[dict[str, Any]] = []

        def queue(self, status_update_rate: str = "auto", max_size: int | None = None,
                  default_concurrency_limit: object = "not_set") -> Any:
            self.calls.append({"max_size": max_size, "default_concurrency_limit": default_concurrency_limit})
            self._queue.max_size = max_size
            return self

        def launch(self, inline: bool | None = None, inbrowser: bool = False, share: bool | None = None,
                   max_threads: int = 40, server_name: str | None = None, server_port: int | None = None,
                   show_error: bool = False) -> dict[str, Any]:
            return {"inbrowser": inbrowser, "share": share, "max_threads": max_threads,
                    "server_name": server_name, "server_port": server_port, "show_error": show_error}

    return Blocks


def hook_for(module: ModuleType, tmp_path: Path, knobs: dict[str, Any], events: list[str] | None) -> Any:
    return module._Hook({"knobs": knobs, "events": events, "port": 7861,
                         "record": str(tmp_path / "hook-record.json")})


def test_the_hook_sets_a_4x_apps_queue_events_and_launch(hook_module: ModuleType, tmp_path: Path) -> None:
    knobs = {"concurrency_limit": 8, "max_batch_size": 16, "max_threads": 12, "max_size": "none",
             "default_concurrency_limit": 3}
    hook = hook_for(hook_module, tmp_path, knobs, ["/respond"])
    blocks_class = blocks4()
    hook_module.patch_blocks(SimpleNamespace(Blocks=blocks_class), hook)
    hook_module.patch_blocks(SimpleNamespace(Blocks=blocks_class), hook)  # a second patch is a no-op
    demo = blocks_class([Fn4("respond", batch=True), Fn4("other", limit=2)])
    demo.queue(max_size=20, default_concurrency_limit=2)
    assert demo.calls == [{"max_size": None, "default_concurrency_limit": 3}]  # the point's, not the app's
    started = demo.launch(server_port=9999, max_threads=100, share=True)
    assert started == {"inbrowser": False, "share": False, "max_threads": 12, "server_name": "127.0.0.1",
                       "server_port": 7861, "show_error": True}
    respond, other = demo.fns[0], demo.fns[1]
    assert (respond.concurrency_limit, respond.max_batch_size) == (8, 16)
    assert (other.concurrency_limit, other.max_batch_size) == (2, 4)  # not a driven event: untouched
    record = read_hook_record(tmp_path)
    assert record is not None and record.launched and record.gradio_version == "4.44.1"
    assert record.queue["app"] == {"default_concurrency_limit": 2, "max_size": 20}
    assert record.queue["set"] == {"default_concurrency_limit": 3, "max_size": None}
    assert record.launch["app"]["server_port"] == 9999 and record.launch["app"]["max_threads"] == 100
    chosen = {e.api_name: e for e in record.events}
    assert chosen["respond"].chosen
    assert chosen["respond"].set == {"concurrency_limit": 8, "max_batch_size": 16}
    assert chosen["respond"].app["concurrency_limit"] == "default" and not chosen["other"].chosen
    assert record.problems == []


def test_every_queued_event_with_a_function_is_chosen_without_driven_events(
    hook_module: ModuleType, tmp_path: Path
) -> None:
    hook = hook_for(hook_module, tmp_path, {"concurrency_limit": 5, "max_batch_size": 8}, None)
    blocks_class = blocks4()
    hook_module.patch_blocks(SimpleNamespace(Blocks=blocks_class), hook)
    unqueued, no_fn = Fn4("direct", queue=False), Fn4("js_only")
    no_fn.fn = None  # type: ignore[assignment]
    demo = blocks_class([Fn4("a"), unqueued, no_fn])
    demo.launch()
    assert [e["chosen"] for e in hook.record["events"]] == [True, False, False]
    assert demo.fns[0].concurrency_limit == 5 and demo.fns[0].max_batch_size == 4  # not batch=True
    assert hook.record["problems"] == ["max_batch_size=8 on `a`: not set, the function is not batch=True"]
    # an app that never called queue(): its default limit is Gradio's, from the environment
    assert hook.record["queue"]["app"] == {"default_concurrency_limit": 1}


def test_events_sharing_a_concurrency_id_share_the_lowest_limit(
    hook_module: ModuleType, tmp_path: Path
) -> None:
    hook = hook_for(hook_module, tmp_path, {}, None)
    blocks_class = blocks4()
    hook_module.patch_blocks(SimpleNamespace(Blocks=blocks_class), hook)
    blocks_class([Fn4("a", limit=2, concurrency_id="g"), Fn4("b", limit=5, concurrency_id="g"),
                  Fn4("c", limit=3)]).launch()
    effective = {e["api_name"]: e["effective"] for e in hook.record["events"]}
    assert (effective["a"]["concurrency_limit"], effective["a"]["shared_with"]) == (2, ["b"])
    assert (effective["b"]["concurrency_limit"], effective["b"]["shared_with"]) == (2, ["a"])
    assert effective["c"]["concurrency_limit"] == 3 and "shared_with" not in effective["c"]


def test_the_hook_sets_a_3x_apps_pool_and_batches(hook_module: ModuleType, tmp_path: Path) -> None:
    class Blocks:  # 3.x: no queue until queue() is called, events as config dicts
        def __init__(self) -> None:
            self.dependencies = [{"api_name": "predict", "batch": False, "max_batch_size": 4},
                                 {"api_name": "batched", "batch": True, "max_batch_size": 4}]
            self.fns = [SimpleNamespace(fn=print), SimpleNamespace(fn=print)]
            self._queue: Any = None

        def queue(self, concurrency_count: int = 1, max_size: int | None = None) -> Any:
            self._queue = SimpleNamespace(max_thread_count=concurrency_count, max_size=max_size)
            return self

        def launch(self, max_threads: int = 40, server_port: int | None = None) -> int | None:
            return server_port

    hook = hook_for(hook_module, tmp_path, {"concurrency_count": 4, "concurrency_limit": 2,
                                            "max_batch_size": 8}, None)
    hook_module.patch_blocks(SimpleNamespace(Blocks=Blocks), hook)
    demo = Blocks()
    assert demo.queue(concurrency_count=1)._queue.max_thread_count == 4
    assert demo.launch() == 7861
    assert demo.dependencies[1]["max_batch_size"] == 8 and demo.dependencies[0]["max_batch_size"] == 4
    assert hook.record["queue"]["app"] == {"concurrency_count": 1, "max_size": None}
    assert hook.record["queue"]["effective"] == {"concurrency_count": 4, "max_size": None}
    assert [e["effective"]["concurrency_limit"] for e in hook.record["events"]] == [4, 4]
    assert hook.record["problems"] == [
        "concurrency_limit: Gradio 3.x has no per-event concurrency_limit; not set",
        "max_batch_size=8 on `predict`: not set, the function is not batch=True",
        "concurrency_limit: Gradio 3.x has no per-event concurrency_limit; not set",
    ]


def test_what_the_hook_cannot_set_is_recorded_as_a_problem(hook_module: ModuleType, tmp_path: Path) -> None:
    class Blocks:  # a 3.x app that never calls queue(), and a launch() without num_workers
        dependencies = [{"api_name": "predict"}]
        fns = [SimpleNamespace(fn=print)]

        def queue(self) -> None: ...

        def launch(self, server_port: int | None = None) -> None: ...

    hook = hook_for(hook_module, tmp_path, {"max_size": 4, "num_workers": 2}, None)
    hook_module.patch_blocks(SimpleNamespace(Blocks=Blocks), hook)
    Blocks().launch()
    assert hook.record["queue"]["enabled"] is False
    assert hook.record["problems"] == [
        "the app does not enable Gradio's queue (3.x: it never calls demo.queue()); queue knobs not set",
        "launch() of Gradio 4.44.1 has no num_workers (6.15 and later have it)",
    ]
    with pytest.raises(TypeError):  # arguments launch() cannot take: the app gets Gradio's own error
        Blocks().launch(1, 2)  # type: ignore[call-arg]
    assert hook.record["problems"][-1] == "launch(): cannot read its arguments; port and knobs not set"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("max_size", "none", None), ("concurrency_limit", "Unlimited", None), ("max_size", "null", None),
     ("concurrency_id", 3, "3"), ("concurrency_limit", 4, 4), ("max_size", "16", "16")],
)
def test_knob_values_as_gradio_takes_them(hook_module: ModuleType, name: str, value: object,
                                          expected: object) -> None:
    assert hook_module._number(name, value) == expected


@pytest.mark.parametrize(("value", "expected"), [("true", True), (" On ", True), (1, True), ("yes", True),
                                                 ("false", False), ("off", False), (0, False), ("", False)])
def test_ssr_mode_flag(hook_module: ModuleType, value: object, expected: bool) -> None:
    assert hook_module._flag(value) is expected


@pytest.mark.parametrize(("env", "expected"), [(None, 1), ("none", None), ("None", None), ("7", 7)])
def test_the_default_limit_gradio_reads_from_the_environment(
    hook_module: ModuleType, monkeypatch: pytest.MonkeyPatch, env: str | None, expected: int | None
) -> None:
    if env is None:
        monkeypatch.delenv("GRADIO_DEFAULT_CONCURRENCY_LIMIT", raising=False)
    else:
        monkeypatch.setenv("GRADIO_DEFAULT_CONCURRENCY_LIMIT", env)
    assert hook_module._env_default_limit() == expected


@pytest.mark.parametrize(("text", "plan"), [("", None), ("{not json", None), ("[1, 2]", None),
                                            ('{"knobs": {"max_threads": 4}}', {"knobs": {"max_threads": 4}})])
def test_the_plan_is_read_from_qbench_hook(hook_module: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                           text: str, plan: dict[str, Any] | None) -> None:
    monkeypatch.setenv("QBENCH_HOOK", text)
    assert hook_module._plan() == plan


def test_the_hook_records_launchs_own_local_check(hook_module: ModuleType, tmp_path: Path) -> None:
    """launch()'s url_ok answer is recorded once (the first call: the local URL) and passed on unchanged:
    qbench sends no load before it (qbench.tune.servers.app_process)."""
    hook = hook_for(hook_module, tmp_path, {}, None)
    networking = SimpleNamespace(url_ok=lambda url: url == "http://127.0.0.1:7861/")
    hook_module.patch_url_check(networking, hook)
    hook_module.patch_url_check(networking, hook)  # a second patch is a no-op
    assert read_hook_record(tmp_path) is None or read_hook_record(tmp_path).launch_checked is None
    assert networking.url_ok("http://127.0.0.1:7861/") is True
    assert networking.url_ok("https://share.example") is False  # a later call is Gradio's, unrecorded
    record = read_hook_record(tmp_path)
    assert record is not None and record.launch_checked is True
    (tmp_path / "f").mkdir()
    failed = hook_for(hook_module, tmp_path / "f", {}, None)
    slow_host = SimpleNamespace(url_ok=lambda url: False)
    hook_module.patch_url_check(slow_host, failed)
    hook_module.patch_url_check(None, failed)  # no gradio.networking: nothing to wrap
    assert slow_host.url_ok("http://127.0.0.1:7861/") is False
    record = read_hook_record(tmp_path / "f")
    assert record is not None and record.launch_checked is False


def test_the_collector_is_paused_while_gradio_imports_and_resumed_however_it_ends(tmp_path: Path) -> None:
    """An app's `import gradio` (torch, transformers) runs with the cyclic collector paused, and it runs
    again once that import is over, an import that raised included; other imports are left alone."""
    libs = tmp_path / "libs"
    for name, last in {"gradio": "", "other": "", "torch": "raise ImportError('no torch here')"}.items():
        (libs / name).mkdir(parents=True)
        (libs / name / "__init__.py").write_text(
            f"import builtins, gc\nsetattr(builtins, 'SEEN_{name}', gc.isenabled())\n{last}\n")
    env = dict(os.environ)
    env.update(hook_env({"concurrency_limit": 2}, 7999, ["respond"], tmp_path / "point"))
    env["PYTHONPATH"] += os.pathsep + str(libs)
    code = ("import builtins, contextlib, gc, gradio, other\n"
            "with contextlib.suppress(ImportError):\n    import torch\n"
            "print(builtins.SEEN_gradio, builtins.SEEN_other, builtins.SEEN_torch, gc.isenabled())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "False", "True"], out.stderr


def fake_gradio(libs: Path) -> None:
    """A package shaped like Gradio 4.x+: its metaclass writes a `.pyi` per component class."""
    (libs / "gradio").mkdir(parents=True)
    (libs / "gradio" / "__init__.py").write_text("from gradio.component_meta import Meta\n"
                                                 "class Textbox(metaclass=Meta):\n    pass\n")
    (libs / "gradio" / "component_meta.py").write_text(
        "import pathlib\n"
        "def create_or_modify_pyi(cls, name, events):\n"
        "    pathlib.Path(__file__).with_name(name + '.pyi').write_text('stub')\n"
        "class Meta(type):\n"
        "    def __new__(mcs, name, bases, attrs):\n"
        "        made = super().__new__(mcs, name, bases, attrs)\n"
        "        create_or_modify_pyi(made, name, [])\n"
        "        return made\n")


def test_gradios_import_writes_no_type_stubs_under_the_hook(tmp_path: Path) -> None:
    """Gradio 4.x+ rewrite a `.pyi` stub for each component class as it is defined (~1 s of `import
    gradio`): an app under the hook defines its components with Gradio's own metaclass all the same, and
    no stub is written; the same app without the hook writes it."""
    libs = tmp_path / "libs"
    fake_gradio(libs)
    code = "import gradio; print(type(gradio.Textbox).__name__)"
    hooked = {**os.environ, **hook_env({"concurrency_limit": 2}, 7999, ["respond"], tmp_path / "point")}
    hooked["PYTHONPATH"] += os.pathsep + str(libs)
    out = subprocess.run([sys.executable, "-c", code], env=hooked, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Meta"] and not (libs / "gradio" / "Textbox.pyi").exists(), out.stderr
    plain = {**os.environ, "PYTHONPATH": str(libs)}
    subprocess.run([sys.executable, "-c", code], env=plain, capture_output=True, text=True, check=True)
    assert (libs / "gradio" / "Textbox.pyi").read_text() == "stub"


def test_without_a_point_an_app_writes_no_stub_and_runs_the_envs_sitecustomize(tmp_path: Path) -> None:
    """The suite's own apps (tests/startup.py: the hook's folder on PYTHONPATH, no QBENCH_HOOK)."""
    libs, own = tmp_path / "libs", tmp_path / "own"
    fake_gradio(libs)
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.ENV_OWN = True\n")
    env = with_startup({**os.environ, "PYTHONPATH": os.pathsep.join([str(own), str(libs)])})
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(FOLDER)
    code = "import builtins, gradio; print(type(gradio.Textbox).__name__, builtins.ENV_OWN)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Meta", "True"] and not (libs / "gradio" / "Textbox.pyi").exists()
    plain = {**os.environ, "PYTHONPATH": str(libs)}  # the same app as it runs elsewhere writes its stub
    subprocess.run([sys.executable, "-c", code.replace(", builtins.ENV_OWN", "")], env=plain, check=True)
    assert (libs / "gradio" / "Textbox.pyi").read_text() == "stub"


def test_without_a_point_gradio_imports_with_the_collector_paused_and_nothing_else_is_hooked(
        tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    fake_gradio(libs)
    init = libs / "gradio" / "__init__.py"
    init.write_text("import builtins, gc\nbuiltins.SEEN = gc.isenabled()\n" + init.read_text())
    (libs / "gradio" / "blocks.py").write_text("class Blocks:\n    def queue(self):\n        return self\n")
    env = with_startup({**os.environ, "PYTHONPATH": str(libs)})
    code = "import builtins, gc, gradio.blocks as b; print(builtins.SEEN, gc.isenabled(), b.Blocks.queue)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[:4] == ["False", "True", "<function", "Blocks.queue"], out.stdout + out.stderr


def test_an_event_without_an_api_name_and_the_batch_counts_read_typed() -> None:
    """Gradio's api_name=False reads as none; the batch counts' sizes, JSON object keys, as ints."""
    hook = HookRecord.from_dict(json.loads(json.dumps({
        "launched": True, "events": [{"fn_index": 1, "api_name": False, "chosen": True}],
        "batch_sizes": {"/predict": {"4": 10, "8": 2}}, "launch_checked": None, "scope": ""})))
    assert hook.events[0].api_name is None and hook.events[0].name == "fn_index 1"
    assert hook.batch_sizes == {"/predict": {4: 10, 8: 2}} and hook.scope == "driven"
    assert hook.launch_checked is None
