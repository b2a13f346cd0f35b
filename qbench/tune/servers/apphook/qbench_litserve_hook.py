"""qbench's startup hook for a LitServe app (imported by sitecustomize.py when the app imports litserve):
the point's LitAPI and LitServer knobs, host and port set as LitServe takes them, and the batches LitServe
hands the app counted in every process. Standard library only."""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any

from qbench_hook_batches import BatchCounter  # type: ignore[import-not-found]  # beside this file

API_KNOBS = ("max_batch_size", "batch_timeout")
SERVER_KNOBS = ("workers_per_device",)
KNOBS = API_KNOBS + SERVER_KNOBS


def _value(name: str, value: Any) -> Any:
    return float(value) if name == "batch_timeout" else int(value)


def _bind(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
    try:
        return inspect.signature(method).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None


def _defaults(method: Any, names: tuple[str, ...]) -> dict[str, Any]:
    params = inspect.signature(method).parameters
    return {n: params[n].default for n in names if n in params}


class LitServeHook:
    """The point's LitServe knobs, and the `litserve` part of the hook's record."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook  # sitecustomize's _Hook: knobs, port, record, write()
        observed = set(getattr(hook, "observed", ()))  # the launch command passes them: recorded, not set
        self.knobs = {k: _value(k, v) for k, v in hook.knobs.items() if k in KNOBS and k not in observed}
        self.part: dict[str, Any] = hook.record.setdefault(
            "litserve", {"version": None, "apis": [], "server": {"app": {}, "set": {}, "effective": {}}})
        hook.record["framework"] = "litserve"
        unknown = sorted(k for k in hook.knobs if k not in KNOBS)
        if unknown:
            hook.record["problems"].append(
                f"{', '.join(unknown)}: not a LitServe knob (LitServe's: {', '.join(KNOBS)}); not set")
        self.counter = BatchCounter(hook.record_path)

    def api_args(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """LitAPI.__init__'s arguments with the point's batch knobs in place of the app's."""
        bound = _bind(method, args, kwargs)
        if bound is None:
            self.hook.record["problems"].append("LitAPI(): cannot read its arguments; batch knobs not set")
            return args, kwargs
        own = {**_defaults(method, API_KNOBS), **{k: v for k, v in bound.arguments.items() if k in API_KNOBS}}
        wanted = {k: v for k, v in self.knobs.items() if k in API_KNOBS}
        bound.arguments.update(wanted)
        api = bound.arguments.get("self")
        if api is not None:
            api._qbench_app = {k: _plain(v) for k, v in own.items()}
            api._qbench_set = wanted
        return bound.args, bound.kwargs

    def server_args(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """LitServer.__init__'s arguments with the point's workers_per_device, and its deprecated batch
        arguments replaced where the app passes them (they would override the LitAPI's)."""
        bound = _bind(method, args, kwargs)
        if bound is None:
            self.hook.record["problems"].append("LitServer(): cannot read its arguments; knobs not set")
            return args, kwargs
        server = self.part["server"]
        own = {**_defaults(method, SERVER_KNOBS),
               **{k: v for k, v in bound.arguments.items() if k in SERVER_KNOBS}}
        server["app"] = {k: _plain(v) for k, v in own.items()}
        if "workers_per_device" in self.knobs:
            bound.arguments["workers_per_device"] = self.knobs["workers_per_device"]
            server["set"]["workers_per_device"] = self.knobs["workers_per_device"]
        for name in API_KNOBS:  # LitServer(api, max_batch_size=N): deprecated, and applied over the LitAPI's
            if bound.arguments.get("max_batch_size") is not None and name in self.knobs:
                server["app"][name] = _plain(bound.arguments.get(name))
                bound.arguments[name] = self.knobs[name]
        return bound.args, bound.kwargs

    def run_args(self, server: Any, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """LitServer.run's arguments: loopback, the point's port, no client file; the record written."""
        self.part["version"] = _version()
        connector = getattr(server, "litapi_connector", None)  # 0.2.x: the APIs behind one connector
        apis = getattr(connector, "lit_apis", None) or getattr(server, "lit_apis", None) or []
        self.part["apis"] = [self._api_record(api) for api in apis]
        self.part["server"]["effective"] = {"workers_per_device": _plain(getattr(server, "workers_per_device",
                                                                               None))}
        bound = _bind(method, args, kwargs)
        if bound is None:
            self.hook.record["problems"].append("LitServer.run(): cannot read its arguments; port not set")
        else:
            params = inspect.signature(method).parameters
            wanted: dict[str, Any] = {"host": "127.0.0.1", "generate_client_file": False}
            if self.hook.port:
                wanted["port"] = self.hook.port
            own = {k: _plain(bound.arguments.get(k, params[k].default)) for k in wanted if k in params}
            self.hook.record["launch"]["app"].update(own)
            for name, value in wanted.items():
                if name in params:
                    bound.arguments[name] = value
                    self.hook.record["launch"]["set"][name] = value
            args, kwargs = bound.args, bound.kwargs
        self.hook.record["launched"] = True
        self.hook.write()
        return args, kwargs

    def _api_record(self, api: Any) -> dict[str, Any]:
        return {"api_path": str(getattr(api, "api_path", "/predict")), "type": type(api).__name__,
                "app": dict(getattr(api, "_qbench_app", {})), "set": dict(getattr(api, "_qbench_set", {})),
                "effective": {k: _plain(getattr(api, k, None)) for k in API_KNOBS}}

    def count_batches(self, cls: Any) -> None:
        """Wrap `cls.batch` and `cls.predict` to count each batch's size (an unbatched call: 1)."""
        counter = self.counter
        original = cls.__dict__.get("batch") or getattr(cls, "batch", None)
        if original is not None and not getattr(original, "_qbench", False):

            @functools.wraps(original)  # LitServe reads batch()'s signature (a `context` argument)
            def batch(self: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
                _count(counter, self, lambda: len(inputs))
                return original(self, inputs, *args, **kwargs)

            batch._qbench = True  # type: ignore[attr-defined]
            cls.batch = batch
        predict = cls.__dict__.get("predict")
        if predict is not None and not getattr(predict, "_qbench", False):

            @functools.wraps(predict)  # and predict()'s
            def counted_predict(self: Any, *args: Any, **kwargs: Any) -> Any:
                if (getattr(self, "max_batch_size", 1) or 1) <= 1:
                    _count(counter, self, lambda: 1)
                return predict(self, *args, **kwargs)

            counted_predict._qbench = True  # type: ignore[attr-defined]
            cls.predict = counted_predict


def _count(counter: BatchCounter, api: Any, size: Any) -> None:
    try:
        counter.add(str(getattr(api, "api_path", "/predict")), int(size()))
    except Exception:  # a count must never break the app's batch
        pass


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _version() -> str | None:
    module = sys.modules.get("litserve.__about__") or sys.modules.get("litserve")
    version = getattr(module, "__version__", None)
    return str(version) if version else None


def patch_api(api_module: Any, hook: Any) -> None:
    """LitAPI.__init__ (the knobs) and LitAPI.__init_subclass__ (each user API's batch() counted: at class
    creation, so in LitServe's spawned workers too, which build the API by unpickling it)."""
    api_class = getattr(api_module, "LitAPI", None)
    if api_class is None or getattr(api_class, "_qbench_hooked", False):
        return
    lit = _litserve_hook(hook)
    original_init = api_class.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        args2, kwargs2 = lit.api_args(original_init, (self, *args), kwargs)
        original_init(*args2, **kwargs2)

    base_subclass = api_class.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type[Any], /, **kwargs: Any) -> None:
        if base_subclass is not None:
            base_subclass.__func__(cls, **kwargs)
        else:
            super(api_class, cls).__init_subclass__(**kwargs)
        lit.count_batches(cls)

    api_class.__init__ = __init__
    api_class.__init_subclass__ = classmethod(__init_subclass__)
    api_class._qbench_hooked = True


def patch_server(server_module: Any, hook: Any) -> None:
    """LitServer.__init__ (workers_per_device) and LitServer.run (port, host, the record)."""
    server_class = getattr(server_module, "LitServer", None)
    if server_class is None or getattr(server_class, "_qbench_hooked", False):
        return
    lit = _litserve_hook(hook)
    original_init, original_run = server_class.__init__, server_class.run

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        args2, kwargs2 = lit.server_args(original_init, (self, *args), kwargs)
        original_init(*args2, **kwargs2)

    @functools.wraps(original_run)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        args2, kwargs2 = lit.run_args(self, original_run, (self, *args), kwargs)
        return original_run(*args2, **kwargs2)

    server_class.__init__, server_class.run = __init__, run
    server_class._qbench_hooked = True


def _litserve_hook(hook: Any) -> LitServeHook:
    lit = getattr(hook, "litserve", None)
    if lit is None:
        lit = hook.litserve = LitServeHook(hook)
    return lit
