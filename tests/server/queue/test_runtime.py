"""The queue's data, directly: running means, the lazy group limit, and the ETA formula by hand."""

from __future__ import annotations

import pytest

from reference_server.http.server_state import build_functions
from reference_server.queue.runtime import Event, FunctionRuntime, Group, Job, RunningMean
from tests.server.queue_harness import settings


def functions(*names: str) -> list[FunctionRuntime]:
    return build_functions(settings([{"api_name": n, "workload": "echo"} for n in names]))


def group_of(fns: list[FunctionRuntime], limit: int | None) -> Group:
    """A group that the functions were pushed to, each with `limit`."""
    group = Group("g")
    for fn in fns:
        group.admit_function(fn, limit)
    return group


def test_running_mean_is_none_until_the_first_value() -> None:
    mean = RunningMean()
    assert mean.mean is None
    for value in (1.0, 2.0, 6.0):
        mean.add(value)
    assert (mean.count, mean.mean) == (3, 3.0)


def test_function_runtime_is_named_by_its_api_name() -> None:
    fa, fb = functions("a", "b")
    assert (fa.name, fa.index, fb.name, fb.index) == ("a", 0, "b", 1)


@pytest.mark.parametrize(
    ("pushed", "limit"),
    [
        ([5], 5),
        ([None], None),
        ([5, 3], 3),
        ([3, 5], 3),
        ([None, 4], 4),  # a later set limit replaces an unset one
        ([4, None], 4),  # a later unset limit does not lift a set one
    ],
)
def test_group_limit_is_the_lowest_set_limit_pushed(pushed: list[int | None], limit: int | None) -> None:
    group = Group("g")
    for fn, fn_limit in zip(functions(*"abcd"[: len(pushed)]), pushed, strict=True):
        group.admit_function(fn, fn_limit)
    assert group.limit == limit


def test_recompute_limit_uses_only_the_pushed_functions() -> None:
    fa, fb, _ = functions("a", "b", "c")
    group = Group("g")
    group.admit_function(fa, 2)
    group.admit_function(fb, 3)
    group.recompute_limit({0: 6, 1: 4, 2: 1})  # "c" was never pushed: its 1 does not count
    assert group.limit == 4
    group.recompute_limit({0: None, 1: None, 2: 1})
    assert group.limit is None


def test_capacity_and_time_till_a_worker_frees() -> None:
    (fa,) = functions("a")
    group = Group("g", limit=2, limit_set=True)
    assert group.has_capacity and group.time_till_available_worker(now=10.0) == 0.0
    fa.job_time.add(1.0)
    group.running = [Job([], fa, started_at=10.0), Job([], fa, started_at=10.4)]
    assert not group.has_capacity
    assert group.time_till_available_worker(now=10.25) == pytest.approx(0.75)  # the earliest end: 11.0
    assert group.time_till_available_worker(now=12.0) == 0.0  # overdue jobs: clipped at 0


def test_time_till_a_worker_is_unknown_while_a_running_function_has_no_average() -> None:
    fa, fb = functions("a", "b")
    fa.job_time.add(1.0)
    group = Group("g", limit=2, limit_set=True)
    group.running = [Job([], fa, started_at=0.0), Job([], fb, started_at=0.0)]
    assert group.time_till_available_worker(now=0.0) is None


def test_estimations_by_hand_for_a_full_group_of_two() -> None:
    fa, fb = functions("a", "b")
    fa.job_time.add(1.0)
    fb.job_time.add(3.0)
    group = group_of([fa, fb], 2)
    group.running = [Job([], fa, started_at=0.0), Job([], fb, started_at=0.0)]  # a frees at 1.0
    for i, fn in enumerate([fa, fb, fa]):
        group.enqueue(Event(f"e{i}", "s", fn, ["x"]))
    etas = [(e.id, rank, eta) for e, rank, eta in group.estimations(now=0.5)]
    # avg + wait_so_far + 0.5; wait_so_far grows by avg / 2 per event ahead: 0, 0.5, 2.0
    assert etas == [("e0", 0, pytest.approx(1.5)), ("e1", 1, pytest.approx(4.0)),
                    ("e2", 2, pytest.approx(3.5))]
    assert group.eta_of_last(now=0.5) == pytest.approx(3.5)


def test_estimations_of_an_unlimited_group_do_not_accumulate() -> None:
    (fa,) = functions("a")
    fa.job_time.add(2.0)
    group = group_of([fa], None)  # limit None: always capacity, nobody waits for anybody
    for i in range(3):
        group.enqueue(Event(f"e{i}", "s", fa, ["x"]))
    assert [eta for _, _, eta in group.estimations(now=0.0)] == [2.0, 2.0, 2.0]
    assert group.eta_of_last(now=0.0) == 2.0


def test_an_event_without_an_average_makes_its_eta_and_every_later_one_null() -> None:
    fa, fb = functions("a", "b")
    fa.job_time.add(1.0)
    group = group_of([fa, fb], 1)
    for i, fn in enumerate([fa, fb, fa]):
        group.enqueue(Event(f"e{i}", "s", fn, ["x"]))
    assert [eta for _, _, eta in group.estimations(now=0.0)] == [1.0, None, None]
    assert group.eta_of_last(now=0.0) is None


def test_remove_keeps_order_and_per_function_counts() -> None:
    fa, fb = functions("a", "b")
    group = Group("g")
    events = [Event(f"e{i}", "s", fn, ["x"]) for i, fn in enumerate([fa, fb, fa, fb, fa])]
    for event in events:
        group.enqueue(event)
    assert group.waiting_per_fn == {0: 3, 1: 2}
    group.remove([events[2]])
    group.remove([events[0], events[3]])
    assert [e.id for e in group.waiting] == ["e1", "e4"]
    assert group.waiting_per_fn == {0: 1, 1: 1}


def test_a_job_lists_only_its_live_events() -> None:
    (fa,) = functions("a")
    events = [Event(f"e{i}", "s", fa, ["x"]) for i in range(3)]
    events[1].alive = False
    assert [e.id for e in Job(events, fa).live_events] == ["e0", "e2"]
