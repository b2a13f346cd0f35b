"""qbench's startup hook for a Ray Serve app (imported by sitecustomize.py when the app imports ray.serve):
the point's @serve.batch and @serve.deployment knobs, host and port set as Ray Serve takes them, and the
batches counted in every replica. Standard library only."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
from typing import Any

from qbench_hook_batches import BatchCounter  # type: ignore[import-not-found]  # beside this file

BATCH_KNOBS = ("max_batch_size", "batch_wait_timeout_s", "max_concurrent_batches")
DEPLOYMENT_KNOBS = ("num_replicas", "max_ongoing_requests", "max_queued_requests")
KNOBS = BATCH_KNOBS + DEPLOYMENT_KNOBS
#: set in the first process that runs the app: Ray's processes (replicas, controller, proxy) inherit it
#: and only count batches (the record is the app's)
CHILD = "QBENCH_RAYSERVE_CHILD"


def _value(name: str, value: Any) -> Any:
    return float(value) if name == "batch_wait_timeout_s" else int(value)


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


class RayServeHook:
    """The point's Ray Serve knobs, and the `rayserve` part of the hook's record."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook  # sitecustomize's _Hook: knobs, port, record, write()
        observed = set(getattr(hook, "observed", ()))  # the launch command passes them: recorded, not set
        self.knobs = {k: _value(k, v) for k, v in hook.knobs.items() if k in KNOBS and k not in observed}
        self.part: dict[str, Any] = hook.record.setdefault(
            "rayserve", {"version": _version(), "batches": [], "deployments": []})
        hook.record["framework"] = "rayserve"
        unknown = sorted(k for k in hook.knobs if k not in KNOBS)
        if unknown:
            hook.record["problems"].append(
                f"{', '.join(unknown)}: not a Ray Serve knob (Ray Serve's: {', '.join(KNOBS)}); not set")
        self.counter = BatchCounter(hook.record_path)
        self.records = CHILD not in os.environ
        os.environ[CHILD] = "1"
        if self.records and not os.environ.get("RAY_ADDRESS"):
            # a Ray instance of its own: ray.init() with no address joins the newest local one it finds
            # (/tmp/ray/ray_current_cluster: another app's, another point's still stopping)
            os.environ["RAY_ADDRESS"] = "local"
            hook.record["launch"]["set"]["ray_address"] = "local"

    def write(self) -> None:
        if self.records:
            self.hook.write()

    # ------------------------------------------------------------ @serve.batch

    def batch_args(self, method: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> tuple[Any, Any, dict[str, Any] | None]:
        """serve.batch's arguments with the point's batch knobs in place of the app's (a bare @serve.batch
        takes Ray Serve's defaults), and the record's entry for them (None: unreadable, left as is)."""
        try:
            bound = inspect.signature(method).bind(*args, **kwargs)
        except (TypeError, ValueError):
            self.hook.record["problems"].append("serve.batch(): cannot read its arguments; not set")
            return args, kwargs, None
        params = inspect.signature(method).parameters
        own = {k: _plain(bound.arguments.get(k, params[k].default)) for k in BATCH_KNOBS if k in params}
        wanted = {k: v for k, v in self.knobs.items() if k in BATCH_KNOBS and k in params}
        missing = [k for k in self.knobs if k in BATCH_KNOBS and k not in params]
        if missing:
            self.hook.record["problems"].append(f"{', '.join(missing)}: not an argument of this Ray Serve's "
                                                "serve.batch; not set")
        bound.arguments.update(wanted)
        return bound.args, bound.kwargs, {"name": "?", "app": own, "set": dict(wanted),
                                          "effective": {**own, **wanted}}

    def _add_batch(self, entry: dict[str, Any], func: Any) -> None:
        entry["name"] = _name(func)
        if self.records:
            self.part["batches"].append(entry)
            self.write()

    def decorated(self, decorator: Any, entry: dict[str, Any]) -> Any:
        """The decorator serve.batch(...) returned, applied to the counted function."""
        def apply(func: Any) -> Any:
            self._add_batch(entry, func)
            return decorator(self.counted(func))
        return apply

    def counted(self, func: Any) -> Any:
        """`func` counting the size of each batch Ray Serve hands it (its first list argument after self)."""
        counter, name = self.counter, _name(func)

        def size(args: tuple[Any, ...]) -> int:
            lists = [a for a in args if isinstance(a, list)]
            return len(lists[0]) if lists else 1

        if inspect.isasyncgenfunction(func):
            @functools.wraps(func)  # Ray Serve reads its signature (self or not) and its kind
            async def counted_gen(*args: Any, **kwargs: Any) -> Any:
                _count(counter, name, args, size)
                async for item in func(*args, **kwargs):
                    yield item
            return counted_gen

        @functools.wraps(func)
        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            _count(counter, name, args, size)
            return await func(*args, **kwargs)
        return counted_async if inspect.iscoroutinefunction(func) else func

    # ------------------------------------------------------------ the deployments

    def built(self, app: Any) -> Any:
        """build_app's BuiltApplication with each deployment's knobs replaced (Deployment.options)."""
        wanted = {k: v for k, v in self.knobs.items() if k in DEPLOYMENT_KNOBS}
        deployments = list(getattr(app, "deployments", None) or [])
        out = []
        for deployment in deployments:
            own = _deployment_settings(deployment)
            done: dict[str, Any] = {}
            changed = deployment
            if wanted:
                try:
                    changed = deployment.options(**wanted)
                    done = dict(wanted)
                except Exception as exc:  # autoscaling_config with num_replicas, a value out of range
                    self.hook.record["problems"].append(
                        f"{getattr(deployment, 'name', '?')}.options({_pairs(wanted)}): Ray Serve refused "
                        f"it ({type(exc).__name__}: {exc}); not set")
            out.append(changed)
            if self.records:
                self.part["deployments"].append({
                    "name": str(getattr(deployment, "name", "?")),
                    "app_name": _plain(getattr(app, "name", None)),
                    "ingress": getattr(deployment, "name", None) == getattr(app, "ingress_deployment_name",
                                                                             None),
                    "app": own, "set": done, "effective": _deployment_settings(changed)})
        self.write()
        if wanted and deployments:
            try:  # a frozen dataclass
                return dataclasses.replace(app, deployments=out)
            except TypeError:
                app.deployments = out
        return app

    # ------------------------------------------------------------ the HTTP proxy, and launched

    def start_args(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """serve_start's http_options: 127.0.0.1 and the point's port, whatever the app asks for."""
        try:
            bound = inspect.signature(method).bind(*args, **kwargs)
        except (TypeError, ValueError):
            self.hook.record["problems"].append("serve.start(): cannot read its arguments; port not set")
            return args, kwargs
        options = bound.arguments.get("http_options")
        given = _options_dict(options)
        own = {k: _plain(given.get(k)) for k in ("host", "port") if given.get(k) is not None}
        wanted: dict[str, Any] = {"host": "127.0.0.1"}
        if self.hook.port:
            wanted["port"] = int(self.hook.port)
        self.hook.record["launch"]["app"].update(own)
        self.hook.record["launch"]["set"].update(wanted)
        bound.arguments["http_options"] = {**given, **wanted}
        self.write()
        return bound.args, bound.kwargs

    def ran(self) -> None:
        """serve.run returned: Ray Serve deployed the app and says it runs."""
        self.hook.record["launched"] = True
        self.write()


def _options_dict(options: Any) -> dict[str, Any]:
    """HTTPOptions (a pydantic model), a dict or None as a dict of the fields set."""
    if options is None:
        return {}
    if isinstance(options, dict):
        return dict(options)
    dump = getattr(options, "model_dump", None) or getattr(options, "dict", None)
    try:
        return dict(dump()) if dump is not None else {}
    except Exception:
        return {}


def _deployment_settings(deployment: Any) -> dict[str, Any]:
    config = getattr(deployment, "_deployment_config", None)
    found = {k: _plain(getattr(config, k, None)) for k in ("num_replicas", "max_ongoing_requests",
                                                            "max_queued_requests")}
    autoscaling = getattr(config, "autoscaling_config", None)
    if autoscaling is not None:
        found["autoscaling"] = True
    return found


def _name(func: Any) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", "?"))


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _count(counter: BatchCounter, name: str, args: tuple[Any, ...], size: Any) -> None:
    try:
        counter.add(name, int(size(args)))
    except Exception:  # a count must never break the app's batch
        pass


def _version() -> str | None:
    try:
        from importlib.metadata import version
        return version("ray")
    except Exception:
        return None


# ---------------------------------------------------------------- the patches


def patch_batching(module: Any, hook: Any) -> None:
    """serve.batch (ray.serve.batching.batch, which ray.serve re-exports once this module has run)."""
    original = getattr(module, "batch", None)
    if original is None or getattr(original, "_qbench", False):
        return
    ray = _rayserve_hook(hook)

    @functools.wraps(original)
    def batch(*args: Any, **kwargs: Any) -> Any:
        func = args[0] if args and callable(args[0]) else None  # bare @serve.batch: the function now
        args2, kwargs2, entry = ray.batch_args(original, args, kwargs)
        if entry is None:
            return original(*args, **kwargs)
        if func is not None:
            ray._add_batch(entry, func)
            return original(ray.counted(func), *args2[1:], **kwargs2)
        return ray.decorated(original(*args2, **kwargs2), entry)

    batch._qbench = True  # type: ignore[attr-defined]
    module.batch = batch


def patch_api(module: Any, hook: Any) -> None:
    """ray.serve.api: build_app (the deployments' knobs) and _run_many (launched, once it returns)."""
    if getattr(module, "_qbench_hooked", False):
        return
    ray = _rayserve_hook(hook)
    build, run_many = getattr(module, "build_app", None), getattr(module, "_run_many", None)
    if build is not None:
        @functools.wraps(build)
        def build_app(*args: Any, **kwargs: Any) -> Any:
            return ray.built(build(*args, **kwargs))
        module.build_app = build_app
    else:
        hook.record["problems"].append("ray.serve.api has no build_app: deployment knobs not set")
    if run_many is not None:
        @functools.wraps(run_many)
        def _run_many(*args: Any, **kwargs: Any) -> Any:
            handles = run_many(*args, **kwargs)
            ray.ran()
            return handles
        module._run_many = _run_many
    module._qbench_hooked = True


def patch_private_api(module: Any, hook: Any) -> None:
    """ray.serve._private.api.serve_start (serve.start, serve.run and `serve run` all call it)."""
    original = getattr(module, "serve_start", None)
    if original is None or getattr(original, "_qbench", False):
        return
    ray = _rayserve_hook(hook)

    @functools.wraps(original)
    def serve_start(*args: Any, **kwargs: Any) -> Any:
        args2, kwargs2 = ray.start_args(original, args, kwargs)
        return original(*args2, **kwargs2)

    serve_start._qbench = True  # type: ignore[attr-defined]
    module.serve_start = serve_start


def _rayserve_hook(hook: Any) -> RayServeHook:
    ray = getattr(hook, "rayserve", None)
    if ray is None:
        ray = hook.rayserve = RayServeHook(hook)
    return ray


PATCHES = {"ray.serve.batching": patch_batching, "ray.serve.api": patch_api,
           "ray.serve._private.api": patch_private_api}


def patch(module: Any, hook: Any) -> None:
    PATCHES[module.__name__](module, hook)
    sys.modules.setdefault("qbench_rayserve_hook", sys.modules[__name__])
