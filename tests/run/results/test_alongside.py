"""An endpoint before and after a mix entry joined (qbench.run.results.alongside), from records made here."""

from __future__ import annotations

from qbench.run.records.schema import RequestRecord
from qbench.run.results.alongside import Alongside, alongside


def record(i: int, label: str, at: float, latency: float, warmup: bool = False) -> RequestRecord:
    return RequestRecord(request_id=i, user_id=0, session_id="", endpoint=label, warmup=warmup,
                         intended_at_s=at, sent_at_s=at, started_at_s=at + latency / 2,
                         completed_at_s=at + latency, outcome="ok")


def chat_and_page(slowdown: float) -> list[RequestRecord]:
    """Chat every 0.1 s for 20 s at 0.2 s, `slowdown` times slower once the page loads join at 10 s."""
    out = [record(i, "chat", i / 10, 0.2 if i < 100 else 0.2 * slowdown) for i in range(200)]
    out += [record(1000 + i, "page /", 10 + i / 5, 0.3) for i in range(50)]
    out.append(record(2000, "chat", 0.0, 9.0, warmup=True))  # the warm-up is not compared
    return out


def test_the_joining_entry_slows_the_others_by_a_measured_ratio() -> None:
    (item,) = alongside(chat_and_page(1.5), {"chat": 0.0, "page /": 10.0}, end_s=20.0)
    assert (item.endpoint, item.joined, item.at_s) == ("chat", "page /", 10.0)
    assert item.before.requests == 100 and item.after.requests == 100
    assert item.before.latency.p95 is not None and abs(item.before.latency.p95 - 0.2) < 1e-9
    assert item.p50_ratio is not None and abs(item.p50_ratio - 1.5) < 1e-9
    assert item.p95_ratio is not None and abs(item.p95_ratio - 1.5) < 1e-9
    assert abs(item.before.throughput_rps - 10.0) < 1e-9 and abs(item.after.throughput_rps - 10.0) < 1e-9
    assert "before page / joined at 10 s (100 requests)" in item.line() and "p95 x1.50" in item.line()
    assert Alongside.from_dict(item.to_dict()) == item


def test_too_few_requests_on_a_side_say_so_instead_of_a_ratio() -> None:
    records = [record(i, "chat", i / 10, 0.2) for i in range(12)]
    (item,) = alongside(records, {"chat": 0.0, "page /": 1.0})
    assert item.p95_ratio is None and item.before.requests == 10 and item.after.requests == 2
    assert "too few ok requests to compare (10 before, 2 after" in item.line()


def test_nothing_starts_later_nothing_to_compare() -> None:
    assert alongside(chat_and_page(2.0), {"chat": 0.0, "page /": 0.0}) == []
    assert alongside([], {"chat": 0.0, "page /": 5.0}) == []
