"""One package-scoped pair of servers per Gradio release, shared by test_versions and test_differential
(one unit of work: tests/conftest.py's TOGETHER), stopped once the worker leaves this package (a
session's would idle until the whole suite ends, and an idle Gradio polls its queue): the test app with
an open queue, and with max_size=1, both served by one process. Releases:
envs.RELEASES, plus QBENCH_GRADIO_VERSIONS (comma-separated, e.g. "4.8.0,4.16.0,4.20.1,4.21.0") for the
intermediate protocol families. An env that cannot be built
(no network, no uv) skips its release with the builder's error; the release is never silently dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .envs import RELEASES, EnvError, ensure_env
from .servers import serve_together

EXTRA = [v for v in os.environ.get("QBENCH_GRADIO_VERSIONS", "").split(",") if v.strip()]


@dataclass(frozen=True)
class Release:
    version: str
    url: str  # the app, open queue
    tight_url: str  # the app with queue max_size=1


@pytest.fixture(scope="package", params=[*RELEASES, *EXTRA])
def release(request: pytest.FixtureRequest) -> Iterator[Release]:
    version = str(request.param).strip()
    try:
        ensure_env(version)
    except EnvError as exc:
        pytest.skip(f"gradio {version}: its env could not be built: {exc}")
    # both apps in one process, each its own Blocks, queue and server: Gradio imported once
    with serve_together([(version, [{}, {"max_size": 1}])]) as ((url, tight),):
        yield Release(version, url, tight)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A module's ONLY_RELEASES (e.g. test_differential's) skips its other releases at collection, so
    no server of theirs starts just to be skipped."""
    for item in items:
        only = getattr(getattr(item, "module", None), "ONLY_RELEASES", None)
        callspec = getattr(item, "callspec", None)
        version = callspec.params.get("release") if callspec is not None else None
        if only is not None and version is not None and version not in only:
            item.add_marker(pytest.mark.skip(reason=f"gradio {version}: not one of {', '.join(only)}"))
