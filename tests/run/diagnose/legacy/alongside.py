"""The other endpoints before and after an entry joined the run: a mix entry's `start:` in one run.

A mix entry with `start: S` (qbench.run.load.mix) gets no requests before S seconds into the run: page loads
that begin while 8 users chat, a batch job that joins the interactive traffic. Every other endpoint
that was running before then is compared with itself, over the same run:

    before   its ok, measured requests intended in [its own start, S)
    after    its ok, measured requests intended from S on

with their latency (from the intended send time), service time and throughput, and the after/before
ratios of the latency's p50 and p95: how much the joining traffic slowed it down, on the same server in
the same minute, without a second run to compare against. Too few requests on either side (MIN_SIDE)
gives no ratio, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from qbench.run.records import RequestRecord, iter_measured
from qbench.run.results.summary import Stats

MIN_SIDE = 5  # ok requests each side needs for a ratio


@dataclass
class Side:
    """One endpoint's ok requests on one side of the join."""

    requests: int = 0
    window_s: float = 0.0
    throughput_rps: float = 0.0
    latency: Stats = field(default_factory=Stats)
    service: Stats = field(default_factory=Stats)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Side:
        return cls(int(data.get("requests", 0)), float(data.get("window_s", 0.0)),
                   float(data.get("throughput_rps", 0.0)), Stats(**(data.get("latency") or {})),
                   Stats(**(data.get("service") or {})))


@dataclass
class Alongside:
    """`endpoint` before and after `joined` started (`at_s` into the run)."""

    endpoint: str
    joined: str
    at_s: float
    before: Side
    after: Side
    p50_ratio: float | None = None  # after / before, latency
    p95_ratio: float | None = None
    note: str | None = None  # why there is no ratio

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alongside:
        return cls(str(data["endpoint"]), str(data["joined"]), float(data["at_s"]),
                   Side.from_dict(data.get("before") or {}), Side.from_dict(data.get("after") or {}),
                   data.get("p50_ratio"), data.get("p95_ratio"), data.get("note"))

    def line(self) -> str:
        """One console line: `chat: p95 0.31 s alone, 0.52 s with page / (from 20 s): x1.68`."""
        b, a = self.before.latency, self.after.latency
        if self.p95_ratio is None or b.p95 is None or a.p95 is None:
            return f"{self.endpoint}: before and after {self.joined} joined at {self.at_s:g} s: {self.note}"
        return (f"{self.endpoint}: latency p50 {b.p50:.3g} s / p95 {b.p95:.3g} s before {self.joined} "
                f"joined at {self.at_s:g} s ({self.before.requests} requests), p50 {a.p50:.3g} s / p95 "
                f"{a.p95:.3g} s with it ({self.after.requests}): p50 x{self.p50_ratio:.2f}, "
                f"p95 x{self.p95_ratio:.2f}")


def alongside(records: Sequence[RequestRecord], starts: Mapping[str, float],
              end_s: float | None = None) -> list[Alongside]:
    """Per entry that starts later (`starts`: label -> start, s), every endpoint that started before it,
    before and after. `end_s`: the end of the sending window (default: the last intended send)."""
    measured = [r for r in iter_measured(records) if r.ok and r.latency_s is not None]
    if not measured:
        return []
    end = end_s if end_s is not None else max(r.intended_at_s for r in measured)
    out: list[Alongside] = []
    for joined, at in sorted(starts.items(), key=lambda kv: kv[1]):
        if at <= 0:
            continue
        for label, own in sorted(starts.items(), key=lambda kv: kv[1]):
            if own >= at:
                continue
            mine = [r for r in measured if r.endpoint == label]
            begin = max(own, min((r.intended_at_s for r in mine), default=own))  # after the warm-up
            before = _side([r for r in mine if r.intended_at_s < at], at - begin)
            after = _side([r for r in mine if r.intended_at_s >= at], max(end - at, 0.0))
            out.append(_compare(label, joined, at, before, after))
    return out


def _side(records: Sequence[RequestRecord], window_s: float) -> Side:
    latency = [r.latency_s for r in records if r.latency_s is not None]
    service = [r.service_s for r in records if r.service_s is not None]
    return Side(len(records), window_s, len(records) / window_s if window_s > 0 else 0.0,
                Stats.of(latency), Stats.of(service))


def _compare(label: str, joined: str, at: float, before: Side, after: Side) -> Alongside:
    item = Alongside(label, joined, at, before, after)
    if min(before.requests, after.requests) < MIN_SIDE:
        item.note = (f"too few ok requests to compare ({before.requests} before, {after.requests} after; "
                     f"{MIN_SIDE} each side needed): start it later, or run longer")
        return item
    b, a = before.latency, after.latency
    if b.p50 and b.p95 and a.p50 is not None and a.p95 is not None:
        item.p50_ratio, item.p95_ratio = a.p50 / b.p50, a.p95 / b.p95
    return item
