"""Shared test fixtures. `reference_server.testing.serve_in_thread` starts a real server in a thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from reference_server.settings import ServerSettings, synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread


@pytest.fixture
def echo_server() -> Iterator[RunningServer]:
    """A reference server with one `echo` function (fn_index 0, api_name "echo")."""
    with serve_in_thread(synthetic_settings()) as server:
        yield server


@pytest.fixture
def server_factory() -> Callable[..., AbstractContextManager[RunningServer]]:
    """`with server_factory(functions=[...], queue={...}) as server:` for custom settings."""

    def make(settings: ServerSettings | None = None, **fields: Any) -> AbstractContextManager[RunningServer]:
        return serve_in_thread(settings if settings is not None else synthetic_settings(**fields))

    return make


@pytest.fixture(autouse=True)
def _sweeps_unconfirmed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep confirms its winner's capacity with a 60 s run by default: the suite's sweeps skip it
    unless they ask for one (--confirm-duration, sweep.confirm_duration); tests/tune/sweep/test_confirm.py
    tests it, and the default itself."""
    monkeypatch.setattr("qbench.tune.sweep.config.DEFAULT_SWEEP_CONFIRM_S", 0.0)
