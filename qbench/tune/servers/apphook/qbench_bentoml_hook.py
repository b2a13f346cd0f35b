"""qbench's startup hook for a BentoML service (imported by sitecustomize.py when the service imports
bentoml's SDK): the point's @bentoml.api and @bentoml.service knobs set in every process `bentoml serve`
starts, and the batches BentoML hands the service counted. Standard library only."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import Any

from qbench_hook_batches import BatchCounter  # type: ignore[import-not-found]  # beside this file

API_KNOBS = ("max_batch_size", "max_latency_ms")
#: set in the first process that builds the service (`bentoml serve`): the workers it starts inherit it
#: and only count batches (the record is the first process's)
CHILD = "QBENCH_BENTOML_CHILD"
SERVICE_KNOBS = ("workers", "max_concurrency")
KNOBS = API_KNOBS + SERVICE_KNOBS


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


class BentoHook:
    """The point's BentoML knobs, and the `bentoml` part of the hook's record."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook  # sitecustomize's _Hook: knobs, port, record, write()
        observed = set(getattr(hook, "observed", ()))  # the launch command passes them: recorded, not set
        self.knobs = {k: int(v) for k, v in hook.knobs.items() if k in KNOBS and k not in observed}
        service: dict[str, Any] = {"app": {}, "set": {}, "effective": {}}
        self.part: dict[str, Any] = hook.record.setdefault(
            "bentoml", {"version": _version(), "apis": [], "service": service})
        hook.record["framework"] = "bentoml"
        unknown = sorted(k for k in hook.knobs if k not in KNOBS)
        if unknown:
            hook.record["problems"].append(
                f"{', '.join(unknown)}: not a BentoML knob (BentoML's: {', '.join(KNOBS)}); not set")
        self.counter = BatchCounter(hook.record_path)
        self.records = CHILD not in os.environ
        os.environ[CHILD] = "1"

    def write(self) -> None:
        if self.records:
            self.hook.write()

    def api_args(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """APIMethod.__init__'s arguments: the point's batch knobs on a batchable API, its function
        wrapped to count the batches BentoML hands it."""
        try:
            bound = inspect.signature(method).bind(*args, **kwargs)
        except (TypeError, ValueError):
            self.hook.record["problems"].append("bentoml.api(): cannot read its arguments; not set")
            return args, kwargs
        params = inspect.signature(method).parameters
        given = {k: bound.arguments.get(k, params[k].default)
                 for k in ("batchable", *API_KNOBS) if k in params}
        func = bound.arguments.get("func")
        name = getattr(func, "__name__", "?")
        route = str(bound.arguments.get("route") or f"/{name}")
        wanted = {k: v for k, v in self.knobs.items() if k in API_KNOBS}
        done: dict[str, Any] = {}
        if given.get("batchable"):
            bound.arguments.update(wanted)
            done = dict(wanted)
        elif wanted.get("max_batch_size", 1) > 1:
            self.hook.record["problems"].append(
                f"max_batch_size={wanted['max_batch_size']} on {route}: not set, the API is not "
                "batchable=True")
        if callable(func):
            bound.arguments["func"] = self._counted(func, route, bool(given.get("batchable")))
        self.part["apis"].append({
            "route": route, "name": name, "app": {k: _plain(v) for k, v in given.items()}, "set": done,
            "effective": {**{k: _plain(v) for k, v in given.items()}, **done}})
        self.write()
        return bound.args, bound.kwargs

    def _counted(self, func: Any, route: str, batchable: bool) -> Any:
        counter = self.counter

        def size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
            if not batchable:
                return 1
            first: Any = args[1] if len(args) > 1 else next(iter(kwargs.values()), None)
            try:
                return len(first)
            except TypeError:
                return 1

        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)  # BentoML reads its signature (the input schema) and its name
            async def counted_async(*args: Any, **kwargs: Any) -> Any:
                counter.add(route, size(args, kwargs))
                return await func(*args, **kwargs)
            return counted_async

        @functools.wraps(func)
        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.add(route, size(args, kwargs))
            return func(*args, **kwargs)
        return counted

    def service_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """The Service's config with the point's workers and traffic max_concurrency."""
        service = self.part["service"]
        traffic = dict(config.get("traffic") or {})
        service["app"] = {"workers": _plain(config.get("workers")),
                          "max_concurrency": _plain(traffic.get("max_concurrency"))}
        out = dict(config)
        if "workers" in self.knobs:
            out["workers"] = service["set"]["workers"] = self.knobs["workers"]
        if "max_concurrency" in self.knobs:
            traffic["max_concurrency"] = service["set"]["max_concurrency"] = self.knobs["max_concurrency"]
            out["traffic"] = traffic
        service["effective"] = {"workers": _plain(out.get("workers")),
                                "max_concurrency": _plain((out.get("traffic") or {}).get("max_concurrency"))}
        self.hook.record["launched"] = True  # `bentoml serve` runs the service it builds: no run() to wait
        self.write()
        return out


def _version() -> str | None:
    try:
        from importlib.metadata import version
        return version("bentoml")
    except Exception:
        return None


def patch_method(method_module: Any, hook: Any) -> None:
    """APIMethod.__init__ (`@bentoml.api` builds one per API)."""
    api_class = getattr(method_module, "APIMethod", None)
    if api_class is None or getattr(api_class, "_qbench_hooked", False):
        return
    bento = _bento_hook(hook)
    original = api_class.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        args2, kwargs2 = bento.api_args(original, (self, *args), kwargs)
        original(*args2, **kwargs2)

    api_class.__init__ = __init__
    api_class._qbench_hooked = True


def patch_service(factory_module: Any, hook: Any) -> None:
    """Service.__init__ (`@bentoml.service(...)` builds one per decorated class): its config."""
    service_class = getattr(factory_module, "Service", None)
    if service_class is None or getattr(service_class, "_qbench_hooked", False):
        return
    bento = _bento_hook(hook)
    original = service_class.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("config"), dict):
            bento.part["name"] = _plain(getattr(kwargs.get("inner"), "__name__", kwargs.get("name")))
            kwargs = {**kwargs, "config": bento.service_config(kwargs["config"])}
        original(self, *args, **kwargs)

    service_class.__init__ = __init__
    service_class._qbench_hooked = True


def _bento_hook(hook: Any) -> BentoHook:
    bento = getattr(hook, "bentoml", None)
    if bento is None:
        bento = hook.bentoml = BentoHook(hook)
    return bento


PATCHES = {"_bentoml_sdk.method": patch_method, "_bentoml_sdk.service.factory": patch_service}


def patch(module: Any, hook: Any) -> None:
    PATCHES[module.__name__](module, hook)
    sys.modules.setdefault("qbench_bentoml_hook", sys.modules[__name__])
