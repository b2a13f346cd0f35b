"""The suite's own Gradio processes write no Gradio type stubs, as an app under qbench's hook does not
(qbench/tune/servers/apphook/sitecustomize.py, _skip_stubs): Gradio 4.x and later rewrite a `.pyi` for
each component class as they import, ~0.8 s of each `import gradio`, and stubs are for editors, never
read at run time. That import also runs with the cyclic collector paused, as under the hook (~0.1 s
less; resumed when it ends, however it ends). The apps the tests start
(tests/gradio_versions/servers.py, tests/conformance/gradio_apps.py, tests/run/gradio_app_process.py)
have this folder on PYTHONPATH (tests.startup.with_startup); the pytest workers call `install()`
(tests/conftest.py). Any sitecustomize the environment has runs too. Standard library only: it runs in
every release's env.
"""

from __future__ import annotations

import gc
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any


def _no_stub(*args: Any, **kwargs: Any) -> None:
    return None


class _Finder(importlib.abc.MetaPathFinder):
    """Finds gradio and gradio.component_meta as usual; gradio runs with the collector paused, and once
    component_meta has run its stub writer is a no-op."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in ("gradio", "gradio.component_meta"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            paused = name == "gradio" and gc.isenabled()
            if paused:
                gc.disable()
            try:
                run(module)
            finally:
                if paused:
                    gc.enable()
            if hasattr(module, "create_or_modify_pyi"):  # component_meta (3.x writes no stub)
                module.create_or_modify_pyi = _no_stub

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _chain() -> None:
    """Run the sitecustomize this one shadows, if the environment has one."""
    here = os.path.dirname(os.path.abspath(__file__))
    me, saved = sys.modules.pop("sitecustomize", None), list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        if me is not None:
            sys.modules["sitecustomize"] = me


if __name__ == "sitecustomize":
    install()
    _chain()
