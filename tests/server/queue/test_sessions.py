"""Session mailboxes and the session table (LRU eviction is in test_queue.py's LRU test)."""

from __future__ import annotations

import asyncio

import pytest

from reference_server.queue.messages import HEARTBEAT
from reference_server.queue.sessions import Heartbeats, Mailbox, Session, Sessions


def msg(i: int) -> dict[str, object]:
    return {"msg": "estimation", "event_id": f"e{i}"}


def test_mailbox_is_fifo_and_reports_its_size() -> None:
    box = Mailbox()
    assert box.empty() and box.qsize() == 0
    for i in range(3):
        box.put_nowait(msg(i))
    assert box.qsize() == 3 and not box.empty()
    assert [box.get_nowait()["event_id"] for _ in range(3)] == ["e0", "e1", "e2"]
    with pytest.raises(asyncio.QueueEmpty):
        box.get_nowait()


def test_mailbox_get_waits_for_a_put_and_wakes_every_reader() -> None:
    async def main() -> list[str]:
        box = Mailbox()
        readers = [asyncio.create_task(box.get()) for _ in range(2)]
        await asyncio.sleep(0)
        assert not any(r.done() for r in readers)
        box.put_nowait(msg(0))
        box.put_nowait(msg(1))
        got = await asyncio.wait_for(asyncio.gather(*readers), 1.0)
        return sorted(m["event_id"] for m in got)

    assert asyncio.run(main()) == ["e0", "e1"]


def test_a_cancelled_get_leaves_no_waiter_behind() -> None:
    async def main() -> int:
        box = Mailbox()
        reader = asyncio.create_task(box.get())
        await asyncio.sleep(0)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        box.put_nowait(msg(0))
        return box.qsize()  # the message is still there for the next reader

    assert asyncio.run(main()) == 1


def test_open_creates_once_and_send_reaches_only_open_sessions() -> None:
    sessions = Sessions()
    first = sessions.open("a")
    assert sessions.open("a") is first and "a" in sessions and len(sessions) == 1
    sessions.send("a", msg(0))
    sessions.send("nobody", msg(1))  # no such session: dropped, not created
    assert "nobody" not in sessions and first.queue.get_nowait()["event_id"] == "e0"
    sessions.add_pending("b", "e7")  # add_pending opens the session
    assert sessions.get("b") is not None and sessions.get("b").pending == {"e7"}  # type: ignore[union-attr]
    assert sessions.drop("a") is first and sessions.drop("a") is None and sessions.get("a") is None


def test_reopening_a_session_makes_it_the_most_recently_used() -> None:
    sessions = Sessions(capacity=2)
    sessions.open("old")
    sessions.open("mid")
    sessions.open("old")  # touched: "mid" is now the least recently used
    sessions.open("new")
    assert "old" in sessions and "mid" not in sessions and len(sessions) == 2


def test_sessions_kept_while_busy_are_trimmed_to_capacity_once_idle() -> None:
    sessions = Sessions(capacity=10)
    for i in range(11):
        sessions.open(f"s{i}").readers = 1
    assert len(sessions) == 11  # nothing could go: every session had a reader
    for i in range(11):
        sessions.open(f"s{i}").readers = 0
    sessions.open("late")
    assert len(sessions) == 10 and "late" in sessions
    assert "s0" not in sessions and "s1" not in sessions and "s2" in sessions


def test_every_listener_of_a_mailbox_hears_each_put() -> None:
    """Readers that run in callbacks (streams.SessionStream.attach) listen; two of one session both hear."""
    box, heard = Mailbox(), []
    box.listeners += [lambda: heard.append("a"), lambda: heard.append("b")]
    box.put_nowait(msg(0))
    box.listeners.pop(0)
    box.put_nowait(msg(1))
    assert heard == ["a", "b", "b"] and box.qsize() == 2


def _heartbeats_of(session: Session) -> int:
    beats = 0
    while not session.queue.empty():
        beats += session.queue.get_nowait() is HEARTBEAT
    return beats


def test_every_reader_beats_on_one_timer_and_a_stopped_one_never() -> None:
    async def main() -> tuple[int, list[int], int, int]:
        heartbeats = Heartbeats()
        first, second, stopped, slow = Session(), Session(), Session(), Session()
        heartbeats.start(first, 0.01)
        heartbeats.start(second, 0.01)
        heartbeats.start(stopped, 0.01).stop()
        heartbeats.start(slow, 30.0)  # not before its interval: an interval after it came
        queued = sum(len(fifo) for fifo in heartbeats._due.values())
        counts = [0, 0]
        for _ in range(500):  # until both have beaten twice (0.02 s; up to 5 s on a busy box)
            await asyncio.sleep(0.01)
            counts = [counts[0] + _heartbeats_of(first), counts[1] + _heartbeats_of(second)]
            if min(counts) >= 2:
                break
        return queued, counts, _heartbeats_of(stopped), _heartbeats_of(slow)

    queued, counts, stopped, slow = asyncio.run(main())
    assert queued == 4  # four beats, one timer (no timer handle per stream)
    assert min(counts) >= 2
    assert stopped == 0 and slow == 0


def test_a_stopped_beat_leaves_no_timer_behind() -> None:
    async def main() -> tuple[bool, int]:
        heartbeats = Heartbeats()
        session = Session()
        beat = heartbeats.start(session, 0.01)
        await asyncio.sleep(0.035)
        beat.stop()
        beats = _heartbeats_of(session)
        await asyncio.sleep(0.03)  # its entry comes due and is dropped; nothing is left to wait for
        return heartbeats._timer is None and not heartbeats._due, beats

    idle, beats = asyncio.run(main())
    assert beats >= 2 and idle


def test_a_beat_due_within_a_millisecond_on_uvloop_still_lets_the_next_reader_start() -> None:
    """uvloop (the server's loop) answers call_at for a time under 0.5 ms away with a plain Handle, no
    when(): a loop running late on a busy box armed one, and the next stream's start failed with a 500."""
    import uvloop

    async def main() -> tuple[str, int]:
        heartbeats = Heartbeats()
        soon, later = Session(), Session()
        beat = heartbeats.start(soon, 0.0004)  # rounds to 0 ms: uvloop calls it soon
        armed = type(heartbeats._timer).__name__
        heartbeats.start(later, 30.0).stop()
        for _ in range(500):  # until it beats (up to 5 s on a busy box)
            await asyncio.sleep(0.01)
            if not soon.queue.empty():
                break
        beat.stop()
        return armed, _heartbeats_of(soon)

    armed, beats = uvloop.run(main())
    assert armed == "Handle"  # the case itself: uvloop's handle for a timer that is due now
    assert beats >= 1
