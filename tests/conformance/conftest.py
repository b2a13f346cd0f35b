"""Servers for the conformance, interop and differential tests (module-scoped: each start costs).

The conformance tests state Gradio's semantics and run against the reference server. Set
`QBENCH_CONFORMANCE_TARGET=gradio` to run the very same tests against real Gradio instead, which is
how the expectations themselves are checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from reference_server.testing import serve_in_thread

from .gradio_apps import PERIODIC_QUEUE, SUITE, TIGHT_QUEUE, QueueSpec, gradio_servers
from .reference import reference_settings

TARGET = os.environ.get("QBENCH_CONFORMANCE_TARGET", "reference")


@contextmanager
def serve_reference(queue: QueueSpec) -> Iterator[str]:
    """The reference server serving the suite in a thread (real uvicorn) on a free port."""
    with serve_in_thread(reference_settings(SUITE, queue)) as server:
        yield server.url


@pytest.fixture(scope="module")
def target_urls() -> Iterator[tuple[str, str]]:
    """(suite URL, tight URL) of the server under test: default queue, and max_threads=2/max_size=3."""
    if TARGET == "gradio":
        with gradio_servers((QueueSpec(), TIGHT_QUEUE)) as urls:
            yield urls[0], urls[1]
        return
    with serve_reference(QueueSpec()) as suite_url, serve_reference(TIGHT_QUEUE) as tight_url:
        yield suite_url, tight_url


@pytest.fixture(scope="module")
def periodic_url() -> Iterator[str]:
    """The server under test with status_update_rate=0.15 s."""
    if TARGET == "gradio":
        with gradio_servers((PERIODIC_QUEUE,)) as urls:
            yield urls[0]
        return
    with serve_reference(PERIODIC_QUEUE) as url:
        yield url


@pytest.fixture(scope="module")
def suite_url(target_urls: tuple[str, str]) -> str:
    return target_urls[0]


@pytest.fixture(scope="module")
def tight_url(target_urls: tuple[str, str]) -> str:
    return target_urls[1]


@pytest.fixture(scope="module")
def both_urls() -> Iterator[dict[str, tuple[str, str]]]:
    """For differential tests: {"gradio": (suite, tight), "reference": (suite, tight)}."""
    with gradio_servers((QueueSpec(), TIGHT_QUEUE)) as g:
        with serve_reference(QueueSpec()) as r_suite, serve_reference(TIGHT_QUEUE) as r_tight:
            yield {"gradio": (g[0], g[1]), "reference": (r_suite, r_tight)}
