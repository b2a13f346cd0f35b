"""session_chat: each session's history grows, its cost with it, and old sessions are forgotten."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from reference_server.workloads import WorkloadConfigError, build_workload
from reference_server.workloads.base import SESSION
from reference_server.workloads.session_chat import SessionChat


def chat(**params: float) -> SessionChat:
    return cast(SessionChat, build_workload("session_chat", {"base_ms": 0, "per_exchange_ms": 0, **params}))


def turn(workload: SessionChat, session: str | None, text: str = "hi") -> str:
    async def call() -> str:
        SESSION.set(session)
        return str((await workload.arun([text]))[0])

    return asyncio.run(call())


def test_each_session_counts_its_own_exchanges() -> None:
    workload = chat()
    assert [turn(workload, "a") for _ in range(3)][-1] == "reply to 'hi' after 2 exchange(s)"
    assert turn(workload, "b") == "reply to 'hi' after 0 exchange(s)"
    assert workload.describe() == {"kind": "session_chat", "sessions": 2,
                                   "calls_by_history": {"0": 2, "1": 1, "2": 1}}


def test_calls_without_a_session_keep_no_history() -> None:
    workload = chat()
    assert turn(workload, None) == turn(workload, None) == "reply to 'hi' after 0 exchange(s)"
    assert workload.describe()["sessions"] == 0


def test_the_reply_quotes_at_most_40_characters() -> None:
    assert turn(chat(), "a", "x" * 100) == f"reply to {'x' * 40!r} after 0 exchange(s)"


def test_the_least_recently_used_session_forgets_its_history() -> None:
    workload = chat(max_sessions=2)
    for session in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" arrives
        turn(workload, session)
    assert list(workload.histories) == ["a", "c"]
    assert turn(workload, "b") == "reply to 'hi' after 0 exchange(s)"


def test_the_cost_grows_with_the_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """The delay asked of the event loop is base_ms + per_exchange_ms per exchange so far (what the busy
    box's wall clock cannot show: a first turn of 5 ms there took 29, longer than the second's 25), and
    each turn takes at least that long."""
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        asked.append(seconds)
        await real_sleep(seconds)

    monkeypatch.setattr("reference_server.workloads.session_chat.asyncio.sleep", sleep)
    workload = chat(base_ms=5, per_exchange_ms=20)
    loop_time = asyncio.new_event_loop()
    took = []
    try:
        SESSION.set("s")
        for _ in range(2):
            start = loop_time.time()
            loop_time.run_until_complete(workload.arun(["x"]))
            took.append(loop_time.time() - start)
    finally:
        loop_time.close()
    assert asked == pytest.approx([0.005, 0.025])
    assert took[0] >= 0.004 and took[1] >= 0.024, took


@pytest.mark.parametrize(("params", "message"), [
    ({"base_ms": -1}, "params.base_ms = -1"),
    ({"max_sessions": 0}, "params.max_sessions = 0"),
    ({"turns": 3}, "params.turns = 3: Extra inputs are not permitted"),
])
def test_bad_params_are_named(params: dict[str, float], message: str) -> None:
    with pytest.raises(WorkloadConfigError, match="workload 'session_chat': " + message):
        build_workload("session_chat", params)
