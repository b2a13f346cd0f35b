"""What the suite's own Gradio processes run at start-up (sitecustomize.py here): `with_startup(env)` is
an environment with this folder first on PYTHONPATH, for the apps the tests start themselves."""

from __future__ import annotations

import os
from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def with_startup(env: dict[str, str]) -> dict[str, str]:
    """`env` with this folder first on PYTHONPATH (its sitecustomize.py runs first in that process)."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join([str(FOLDER), *rest])}
