"""The suite's own Gradio processes start as an app under qbench's hook does, without a point: no type
stubs written, the collector paused while gradio imports (the hook's QUIET and PAUSED). `with_startup(env)`
puts the hook's folder first on PYTHONPATH, for the apps the tests start themselves; the workers install
the same finder (tests/conftest.py)."""

from __future__ import annotations

from qbench.tune.servers.apphook import HOOK_FILE, first_on_path

FOLDER = HOOK_FILE.parent


def with_startup(env: dict[str, str]) -> dict[str, str]:
    """`env` with the hook's folder first on PYTHONPATH (its sitecustomize.py runs first in that process)."""
    return {**env, "PYTHONPATH": first_on_path(FOLDER, env.get("PYTHONPATH", ""))}
