"""The other endpoints before and after a mix entry with `start:` joined, in one run (`alongside`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from qbench.run.json_values import Readable
from qbench.run.records.columns import Columns, Held, column_stat
from qbench.run.records.schema import RequestRecord
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


@dataclass
class Alongside(Readable):
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

    def line(self) -> str:
        """One console line: `chat: p95 0.31 s alone, 0.52 s with page / (from 20 s): x1.68`."""
        b, a = self.before.latency, self.after.latency
        if self.p95_ratio is None or b.p95 is None or a.p95 is None:
            return f"{self.endpoint}: before and after {self.joined} joined at {self.at_s:g} s: {self.note}"
        return (f"{self.endpoint}: latency p50 {b.p50:.3g} s / p95 {b.p95:.3g} s before {self.joined} "
                f"joined at {self.at_s:g} s ({self.before.requests} requests), p50 {a.p50:.3g} s / p95 "
                f"{a.p95:.3g} s with it ({self.after.requests}): p50 x{self.p50_ratio:.2f}, "
                f"p95 x{self.p95_ratio:.2f}")


def alongside(records: Columns | Sequence[RequestRecord], starts: Mapping[str, float],
              end_s: float | None = None) -> list[Alongside]:
    """Per entry that starts later (`starts`: label -> start, s), every endpoint that started before it,
    before and after. `end_s`: the end of the sending window (default: the last intended send)."""
    cols = Held(Columns.of(records))
    measured = cols.where(cols.measured() & cols.ok() & ~np.isnan(cols.floats("latency_s")))
    if not len(measured):
        return []
    intended = measured.floats("intended_at_s")
    end = end_s if end_s is not None else float(intended.max())
    codes, labels = measured.labels("endpoint")
    out: list[Alongside] = []
    for joined, at in sorted(starts.items(), key=lambda kv: kv[1]):
        if at <= 0:
            continue
        for label, own in sorted(starts.items(), key=lambda kv: kv[1]):
            if own >= at:
                continue
            mine = codes == (labels.index(label) if label in labels else -2)
            begin = max(own, float(intended[mine].min()) if mine.any() else own)  # after the warm-up
            before = _side(measured.where(mine & (intended < at)), at - begin)
            after = _side(measured.where(mine & (intended >= at)), max(end - at, 0.0))
            out.append(_compare(label, joined, at, before, after))
    return out


def _side(records: Columns, window_s: float) -> Side:
    n = len(records)
    return Side(n, window_s, n / window_s if window_s > 0 else 0.0,
                _stats(column_stat(records, "latency_s")), _stats(column_stat(records, "service_s")))


def _stats(values: np.ndarray) -> Stats:
    """Stats.of over an array (the same figures: numpy over the same values in the same order)."""
    if not values.size:
        return Stats()
    p50, p90, p95, p99 = (float(x) for x in np.percentile(values, [50, 90, 95, 99]))
    return Stats(count=int(values.size), mean=float(values.mean()), min=float(values.min()), p50=p50,
                 p90=p90, p95=p95, p99=p99, max=float(values.max()))


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
