"""qbench's startup hook: a sweep point's knobs into an unmodified Gradio (3.x to 6.x), LitServe, BentoML,
Ray Serve or TorchServe app, and a record of what it found and set (read by qbench.tune.servers.apphook).
Python imports it at start-up from the folder qbench puts first on PYTHONPATH; QBENCH_HOOK holds the point.
Standard library only: it runs in the app's environment, where qbench is not installed."""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.abc
import importlib.machinery
import inspect
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

HOOK_VERSION = 1
QUEUE_KNOBS = ("default_concurrency_limit", "concurrency_count", "max_size")
EVENT_KNOBS = ("concurrency_limit", "concurrency_id", "max_batch_size")
LAUNCH_KNOBS = ("num_workers", "ssr_mode")  # launch() settings besides max_threads and the port
_UNSET = object()


def _plan() -> dict[str, Any] | None:
    text = os.environ.get("QBENCH_HOOK")
    if not text:
        return None
    try:
        plan = json.loads(text)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


def _number(name: str, value: Any) -> Any:
    """A knob value as Gradio takes it: "none" is None for the limits and max_size."""
    if isinstance(value, str) and value.lower() in ("none", "null", "unlimited"):
        return None
    if name == "concurrency_id":
        return str(value)
    return value


class _Hook:
    """The point's knobs, and the record of what was found and set."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.knobs: dict[str, Any] = dict(plan.get("knobs") or {})
        events = plan.get("events")
        self.events: list[str] | None = [str(e).lstrip("/") for e in events] if events is not None else None
        self.port: int | None = plan.get("port")
        self.record_path: str | None = plan.get("record")
        self.env_reads: set[str] = set()  # QBENCH_* variables the app reads itself
        self.observed: list[str] = [str(k) for k in plan.get("observe") or []]  # the command passes them
        self.record: dict[str, Any] = {"hook_version": HOOK_VERSION, "knobs": self.knobs,
                                       "observed": self.observed,
                                       "scope": "all" if self.events is None else "driven",
                                       "driven": self.events, "queue": {"app": {}, "set": {}},
                                       "launch": {"app": {}, "set": {}}, "events": [], "problems": [],
                                       "launched": False}

    # ------------------------------------------------------------ queue()

    def queue_args(self, method: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """The app's queue() arguments with the point's queue-wide knobs in their place; the app's own
        values are kept on the Blocks (the last call wins, as in Gradio)."""
        bound = _bind(method, args, kwargs)
        if bound is None:
            return args, kwargs
        params = inspect.signature(method).parameters
        own: dict[str, Any] = {}
        for name in QUEUE_KNOBS:
            if name not in params:
                continue
            own[name] = _plain(bound.arguments.get(name, params[name].default))
            if name in self.knobs:
                bound.arguments[name] = _number(name, self.knobs[name])
        with_set = bound.arguments.get("self", args[0] if args else None)
        if with_set is not None:
            with contextlib.suppress(AttributeError, TypeError):
                with_set._qbench_queue_app = own
        return bound.args, bound.kwargs

    # ------------------------------------------------------------ launch()

    def launch_args(self, blocks: Any, method: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        self.record["gradio_version"] = _gradio_version()
        self._queue_state(blocks)
        self._events(blocks)
        bound = _bind(method, args, kwargs)
        if bound is None:
            self.record["problems"].append("launch(): cannot read its arguments; port and knobs not set")
            return args, kwargs
        params = inspect.signature(method).parameters
        # show_error: an app's exception reaches qbench's records, not only "Error"
        wanted: dict[str, Any] = {"server_name": "127.0.0.1", "inbrowser": False, "share": False,
                                  "show_error": True}
        if self.port:
            wanted["server_port"] = int(self.port)
        if "max_threads" in self.knobs:
            wanted["max_threads"] = int(self.knobs["max_threads"])
        wanted.update(self._launch_knobs(params))
        for name, value in wanted.items():
            if name in params:
                own = bound.arguments.get(name, params[name].default)
                self.record["launch"]["app"][name] = _plain(own)
                bound.arguments[name] = value
                self.record["launch"]["set"][name] = value
        if "max_threads" in params:  # it caps the jobs running at once: the check needs the app's own
            own_threads = bound.arguments.get("max_threads", params["max_threads"].default)
            self.record["launch"]["app"].setdefault("max_threads", _plain(own_threads))
        self.record["launched"] = True
        self.record["app_reads"] = sorted(self.env_reads)
        self.write()
        return bound.args, bound.kwargs

    def _launch_knobs(self, params: Any) -> dict[str, Any]:
        """num_workers and ssr_mode where launch() has them (else a problem recorded)."""
        wanted: dict[str, Any] = {}
        for name in LAUNCH_KNOBS:
            if name not in self.knobs:
                continue
            if name not in params:
                self.record["problems"].append(
                    f"launch() of Gradio {self.record.get('gradio_version')} has no {name} "
                    f"({'6.15' if name == 'num_workers' else '5.0'} and later have it)")
                continue
            value = self.knobs[name]
            wanted[name] = _flag(value) if name == "ssr_mode" else int(value)
        if wanted:
            patch_launch_effects(self)
        return wanted

    def _queue_state(self, blocks: Any) -> None:
        """The queue-wide knobs set on the queue itself (4.x and later build one in Blocks())."""
        queue = getattr(blocks, "_queue", None)
        state = self.record["queue"]
        state["app"] = own = dict(getattr(blocks, "_qbench_queue_app", None) or {})
        state["enabled"] = queue is not None and getattr(blocks, "enable_queue", True) is not False
        if queue is None:
            if any(name in self.knobs for name in QUEUE_KNOBS):
                self.record["problems"].append("the app does not enable Gradio's queue (3.x: it never "
                                               "calls demo.queue()); queue knobs not set")
            return
        if hasattr(queue, "default_concurrency_limit"):  # 4.x and later
            if own.get("default_concurrency_limit", "not_set") == "not_set":
                own["default_concurrency_limit"] = _env_default_limit()
            own.pop("concurrency_count", None)
            self._set(queue, "default_concurrency_limit")
            state["effective"] = {"default_concurrency_limit": _plain(queue.default_concurrency_limit)}
        else:  # 3.x: one pool of workers, sized by queue(concurrency_count)
            own.setdefault("concurrency_count", _plain(getattr(queue, "max_thread_count", None)))
            state["effective"] = {"concurrency_count": _plain(getattr(queue, "max_thread_count", None))}
            if "concurrency_count" in self.knobs:
                state["set"]["concurrency_count"] = _plain(getattr(queue, "max_thread_count", None))
        self._set(queue, "max_size")
        state["effective"]["max_size"] = _plain(getattr(queue, "max_size", None))

    def _set(self, queue: Any, name: str) -> None:
        if name in self.knobs:
            setattr(queue, name, _number(name, self.knobs[name]))
            self.record["queue"]["set"][name] = _plain(getattr(queue, name))

    def _events(self, blocks: Any) -> None:
        dependencies = getattr(blocks, "dependencies", None)
        fns = getattr(blocks, "fns", None)
        if isinstance(fns, dict):
            items: list[tuple[int, Any]] = list(fns.items())
        elif isinstance(fns, list) and fns and not isinstance(dependencies, list):
            items = list(enumerate(fns))
        else:
            items = []
        if items and hasattr(items[0][1], "concurrency_limit"):  # 4.x and later: BlockFunction
            for index, fn in items:
                self._event4(index, fn, blocks)
            self._shared_limits()
        elif isinstance(dependencies, list):  # 3.x: config dicts
            for index, dep in enumerate(dependencies):
                self._event3(index, dep, blocks)
        else:
            self.record["problems"].append("no event listeners found on the launched Blocks")

    def _chosen(self, index: int, api_name: Any, queued: bool, has_fn: bool) -> bool:
        if not has_fn or not queued:
            return False
        if self.events is None:
            return True
        return str(api_name or "").lstrip("/") in self.events or str(index) in self.events

    def _event4(self, index: int, fn: Any, blocks: Any) -> None:
        queued = getattr(fn, "queue", True) is not False
        chosen = self._chosen(index, fn.api_name, queued, getattr(fn, "fn", None) is not None)
        app = {"concurrency_limit": _plain(fn.concurrency_limit), "concurrency_id": _plain(fn.concurrency_id),
               "batch": bool(fn.batch), "max_batch_size": _plain(fn.max_batch_size)}
        done: dict[str, Any] = {}
        if chosen:
            for name in ("concurrency_limit", "concurrency_id"):
                if name in self.knobs:
                    setattr(fn, name, _number(name, self.knobs[name]))
                    done[name] = _plain(getattr(fn, name))
            self._batch(fn.api_name or index, bool(fn.batch), done,
                        lambda size: setattr(fn, "max_batch_size", size))
            if "max_batch_size" in done:
                fn.max_batch_size = done["max_batch_size"]
        limit = fn.concurrency_limit
        queue = getattr(blocks, "_queue", None)
        if limit == "default":
            limit = getattr(queue, "default_concurrency_limit", None)
        self.record["events"].append({
            "fn_index": index, "api_name": fn.api_name, "queued": queued, "chosen": chosen, "app": app,
            "set": done, "effective": {"concurrency_limit": _plain(limit),
                                       "concurrency_id": _plain(fn.concurrency_id),
                                       "batch": bool(fn.batch), "max_batch_size": _plain(fn.max_batch_size)},
        })

    def _shared_limits(self) -> None:
        """Events sharing a concurrency_id share the lowest of their limits: record it as effective."""
        groups: dict[Any, list[Any]] = {}
        for event in self.record["events"]:
            if event["queued"]:
                groups.setdefault(event["effective"]["concurrency_id"], []).append(event)
        for events in groups.values():
            limits = [e["effective"]["concurrency_limit"] for e in events
                      if isinstance(e["effective"]["concurrency_limit"], int)]
            if len(events) > 1 and limits:
                for event in events:
                    event["effective"]["concurrency_limit"] = min(limits)
                    event["effective"]["shared_with"] = [e["api_name"] for e in events if e is not event]

    def _event3(self, index: int, dep: dict[str, Any], blocks: Any) -> None:
        queued = dep.get("queue") is not False
        fns = getattr(blocks, "fns", [])
        has_fn = index < len(fns) and getattr(fns[index], "fn", None) is not None
        chosen = self._chosen(index, dep.get("api_name"), queued, has_fn)
        app = {"batch": bool(dep.get("batch")), "max_batch_size": _plain(dep.get("max_batch_size"))}
        done: dict[str, Any] = {}
        if chosen:
            for name in ("concurrency_limit", "concurrency_id"):
                if name in self.knobs:
                    self.record["problems"].append(f"{name}: Gradio 3.x has no per-event {name}; not set")
            self._batch(dep.get("api_name") or index, bool(dep.get("batch")), done,
                        lambda size: dep.__setitem__("max_batch_size", size))
        queue = getattr(blocks, "_queue", None)
        count = getattr(queue, "max_thread_count", None) if queue is not None else None
        self.record["events"].append({
            "fn_index": index, "api_name": dep.get("api_name"), "queued": queued, "chosen": chosen,
            "app": app, "set": done,
            "effective": {"concurrency_limit": count, "batch": bool(dep.get("batch")),
                          "max_batch_size": _plain(dep.get("max_batch_size"))},
        })

    def _batch(self, name: Any, batch: bool, done: dict[str, Any], assign: Any) -> None:
        """max_batch_size only on a function the app declared batch=True (it must take lists)."""
        if "max_batch_size" not in self.knobs:
            return
        size = self.knobs["max_batch_size"]
        if batch:
            assign(int(size))
            done["max_batch_size"] = int(size)
        elif isinstance(size, int | float) and size > 1:
            self.record["problems"].append(
                f"max_batch_size={size} on `{name}`: not set, the function is not batch=True")

    def write(self) -> None:
        if not self.record_path:
            return
        tmp = f"{self.record_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(self.record, handle, indent=1, default=str)
        os.replace(tmp, self.record_path)


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _bind(method: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
    try:
        return inspect.signature(method).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None


def _env_default_limit() -> Any:
    """The default_concurrency_limit Gradio uses when queue() does not set it (4.x and later)."""
    value = os.environ.get("GRADIO_DEFAULT_CONCURRENCY_LIMIT")
    if value is None:
        return 1
    return None if value.lower() == "none" else int(value)


def _flag(value: Any) -> bool:
    """ssr_mode as a sweep writes it: true/false, on/off, 1/0."""
    return str(value).strip().lower() in ("true", "on", "1", "yes")


def patch_launch_effects(hook: _Hook) -> None:
    """Record what launch() really started for num_workers and ssr_mode: the static-file workers that
    answered /health, the Node proxy's port (None: SSR fell back to Python); the record is written again."""
    effects = hook.record["launch"].setdefault("effective", {})
    static = sys.modules.get("gradio.static_server") or _import("gradio.static_server")
    pool = getattr(static, "StaticWorkerPool", None)
    if pool is not None and not getattr(pool.start, "_qbench", False):
        original_start = pool.start

        def start(self: Any) -> Any:
            out = original_start(self)
            effects["static_workers"] = len(getattr(self, "workers", []))
            effects["static_workers_healthy"] = sum(_healthy(port) for port in getattr(self, "ports", []))
            hook.write()
            return out

        start._qbench = True  # type: ignore[attr-defined]
        pool.start = start
    blocks = sys.modules.get("gradio.blocks")
    node = getattr(blocks, "start_node_server", None)
    if node is not None and not getattr(node, "_qbench", False):
        def start_node_server(*args: Any, **kwargs: Any) -> Any:
            out = node(*args, **kwargs)
            port = out[2] if isinstance(out, tuple) and len(out) == 3 else None
            effects["ssr_proxy_port"] = port
            effects["ssr"] = port is not None
            hook.write()
            return out

        start_node_server._qbench = True  # type: ignore[attr-defined]
        blocks.start_node_server = start_node_server  # type: ignore[union-attr]


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception:  # an older release without the module
        return None


def _healthy(port: Any) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{int(port)}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except Exception:
        return False


def _gradio_version() -> str | None:
    module = sys.modules.get("gradio")
    version = getattr(module, "__version__", None)
    return str(version) if version else None


def patch_blocks(blocks_module: Any, hook: _Hook) -> None:
    """Wrap Blocks.queue and Blocks.launch (subclasses such as Interface and ChatInterface inherit them)."""
    blocks_class = getattr(blocks_module, "Blocks", None)
    if blocks_class is None or getattr(blocks_class, "_qbench_hooked", False):
        return
    original_queue, original_launch = blocks_class.queue, blocks_class.launch

    def queue(self: Any, *args: Any, **kwargs: Any) -> Any:
        args2, kwargs2 = hook.queue_args(original_queue, (self, *args), kwargs)
        return original_queue(*args2, **kwargs2)

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        args2, kwargs2 = hook.launch_args(self, original_launch, (self, *args), kwargs)
        return original_launch(*args2, **kwargs2)

    for name, wrapper, original in (("queue", queue, original_queue), ("launch", launch, original_launch)):
        wrapper.__doc__, wrapper.__name__ = original.__doc__, name
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(blocks_class, name, wrapper)
    blocks_class._qbench_hooked = True
    patch_url_check(sys.modules.get("gradio.networking"), hook)


def patch_url_check(networking: Any, hook: _Hook) -> None:
    """Record launch()'s local check (`networking.url_ok`) as `launch_checked` once it answers."""
    original = getattr(networking, "url_ok", None)
    if original is None or getattr(original, "_qbench_hooked", False):
        return

    def url_ok(*args: Any, **kwargs: Any) -> Any:
        answer = original(*args, **kwargs)
        if "launch_checked" not in hook.record:  # the first call is launch()'s on the local URL
            hook.record["launch_checked"] = bool(answer)
            hook.write()
        return answer

    url_ok.__doc__, url_ok.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
    url_ok._qbench_hooked = True  # type: ignore[attr-defined]
    networking.url_ok = url_ok


def _patch_litserve(module: Any, hook: _Hook) -> None:
    litserve_hook = importlib.import_module("qbench_litserve_hook")  # on PYTHONPATH beside this file
    patch = litserve_hook.patch_api if module.__name__ == "litserve.api" else litserve_hook.patch_server
    patch(module, hook)


def _patch_bentoml(module: Any, hook: _Hook) -> None:
    importlib.import_module("qbench_bentoml_hook").patch(module, hook)


def _patch_rayserve(module: Any, hook: _Hook) -> None:
    importlib.import_module("qbench_rayserve_hook").patch(module, hook)


def _patch_torchserve(module: Any, hook: _Hook) -> None:
    importlib.import_module("qbench_torchserve_hook").patch(module, hook)


def _skip_stubs(module: Any, hook: _Hook | None) -> None:
    """Gradio 4.x and later: a no-op in place of writing type stubs at import (never read at run time)."""
    if hasattr(module, "create_or_modify_pyi"):
        module.create_or_modify_pyi = lambda *args, **kwargs: None


#: the modules whose import the hook waits for, and what it patches in each once they have run
PATCHES: dict[str, Any] = {"gradio.component_meta": _skip_stubs, "gradio.blocks": patch_blocks,
                           "litserve.api": _patch_litserve, "litserve.server": _patch_litserve,
                           "_bentoml_sdk.method": _patch_bentoml,
                           "_bentoml_sdk.service.factory": _patch_bentoml,
                           "ray.serve.batching": _patch_rayserve, "ray.serve.api": _patch_rayserve,
                           "ray.serve._private.api": _patch_rayserve, "ts.service": _patch_torchserve}
#: the patches that need no point: a process with this folder on its path and no QBENCH_HOOK (the suite's
#: own apps: tests/startup.py) imports gradio as a hooked app does, and nothing else changes
QUIET = frozenset({"gradio.component_meta"})


#: the packages whose import runs with the cyclic collector paused (resumed when the import ends, however
#: it ends): the app starts, not measured, cost less (each collection walks the growing heap: `import
#: gradio` 2.9 s of CPU with it, 2.4 s without; torch and transformers alike)
PAUSED = frozenset({"gradio", "torch", "transformers"})


class _Loader(importlib.abc.Loader):
    """Runs a watched module as usual, then patches it; a PAUSED package runs with the collector paused."""

    def __init__(self, loader: Any, hook: _Hook | None) -> None:
        self.loader, self.hook = loader, hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        paused = module.__name__ in PAUSED and gc.isenabled()
        if paused:
            gc.disable()
        try:
            self.loader.exec_module(module)
        finally:
            if paused:
                gc.enable()
        if module.__name__ in PATCHES and (self.hook is not None or module.__name__ in QUIET):
            PATCHES[module.__name__](module, self.hook)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the real loader
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Hands the watched modules to `_Loader` (without a point, only the PAUSED and QUIET ones)."""

    def __init__(self, hook: _Hook | None) -> None:
        self.hook = hook
        self.watched = (PATCHES.keys() if hook is not None else QUIET) | PAUSED

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in self.watched:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, self.hook)
                return spec
        return None


def _chain() -> None:
    """Run the sitecustomize this one shadows, if any; its failure reported as Python would."""
    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.get("sitecustomize")
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        sys.modules.pop("sitecustomize", None)
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}", file=sys.stderr)
    except Exception as exc:
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}", file=sys.stderr)
    finally:
        sys.path[:] = saved
        if me is not None:
            sys.modules["sitecustomize"] = me


_LIBRARY_DIRS = (os.path.dirname(os.__file__), "site-packages", "dist-packages")


def _by_app() -> bool:
    """Whether the code reading os.environ is the app's own (not the standard library, not site-packages)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<") or os.path.basename(name) in ("os.py", "_collections_abc.py")):
            return not any(part in name for part in _LIBRARY_DIRS) and name != __file__
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _watch_environ(hook: _Hook) -> None:
    """Note which QBENCH_* variables the app reads itself; os.environ behaves exactly as before."""
    base = type(os.environ)

    class _Watched(base):  # type: ignore[valid-type,misc]
        def __getitem__(self, key: Any) -> Any:
            if isinstance(key, str) and key.startswith("QBENCH_") and key != "QBENCH_HOOK" and _by_app():
                hook.env_reads.add(key)
            return super().__getitem__(key)

    with contextlib.suppress(TypeError):
        os.environ.__class__ = _Watched


def install() -> None:
    """The point's hook (QBENCH_HOOK); without one, only the quiet imports (PAUSED, QUIET). Once a process."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    plan = _plan()
    hook = None if plan is None else _Hook(plan)
    if hook is not None:
        _watch_environ(hook)
        if hook.record_path and not os.path.exists(hook.record_path):
            hook.write()  # an app that never launches Blocks leaves this record: launched false
    for name, patch in PATCHES.items():
        if name in sys.modules and (hook is not None or name in QUIET):
            patch(sys.modules[name], hook)
    sys.meta_path.insert(0, _Finder(hook))


if __name__ == "sitecustomize":  # Python's start-up (a test loads it under another name: no side effects)
    _chain()
    install()
