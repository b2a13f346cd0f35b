"""Past the capacity: does throughput hold as the queue grows (-> max_size advice), and how true is the
server's ETA? One run past the capacity -> Overload. Design: docs/design/search-points-verdicts.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qbench.run import ReadableOrNone, RequestRecord, own_cap_lead

OVERLOAD_FACTOR = 1.3
BLOCKS = 10
BASE_BLOCKS = 3
FALL = 0.10
MIN_WAIT_S = 0.05  # a request that waited less is not a test of the ETA


@dataclass(frozen=True)
class Overload(ReadableOrNone):
    """What one run past the capacity showed, and the max_size advice that follows."""

    rate_rps: float  # offered
    capacity_rps: float  # the capacity it is a multiple of
    base_rps: float  # ok completions/s in the first slices
    end_rps: float  # ok completions/s in the last slices
    fell_at_waiting: int | None  # requests waiting where throughput first fell FALL below base (None: held)
    max_waiting: int  # the most requests waiting in the run
    series: list[list[float]]  # [slice middle (s), ok completions/s, waiting] per slice
    max_size: int | None  # the advised queue cap (None: nothing to advise)
    advice: str
    eta_ratio: float | None = None  # median server ETA / median real wait (None: no ETA to compare)
    tips_at_waiting: int | None = None  # waiting where throughput fell under capacity_rps (None: never)
    eta_requests: int = 0
    eta_finding: str = ""
    cap_server: str = ""  # the server's name where its cap is not Gradio's max_size (LitServe, BentoML)

    @property
    def fall(self) -> float:
        """Relative drop of throughput from the base to the end (0: held; negative: rose)."""
        return 1 - self.end_rps / self.base_rps if self.base_rps > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fall": self.fall}

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A series row that is not numbers is left out."""
        if isinstance(data.get("series"), list):
            data["series"] = [row for row in data["series"] if isinstance(row, list)
                              and all(type(x) in (int, float) for x in row)]
        return data


def analyse(records: Sequence[RequestRecord], rate_rps: float, capacity_rps: float,
            latency_bound_s: float | None, uncapped: str | None = None, own_cap: str = "", own_now: str = ""
            ) -> Overload | None:
    """The overload run's throughput against its queue, the advice, the ETA finding (None: too few requests);
    `uncapped`: a server without max_size, with its own cap `own_cap` (now `own_now`)."""
    sent = [r for r in records if r.sent_at_s is not None]
    measured = [r for r in sent if not r.warmup]
    if len(measured) < 4 * BLOCKS:
        return None
    measured_sends = [float(r.sent_at_s) for r in measured if r.sent_at_s is not None]
    t0, t1 = min(measured_sends), max(measured_sends)
    edges = np.linspace(t0, t1, BLOCKS + 1)
    done = np.sort([r.completed_at_s for r in sent if r.ok and r.completed_at_s is not None])
    sends = np.sort([float(r.sent_at_s) for r in sent if r.sent_at_s is not None])
    has_start = sum(r.started_at_s is not None for r in measured) >= len(measured) // 2
    left = np.sort([_left_queue(r, has_start) for r in sent])
    width = (t1 - t0) / BLOCKS
    ok_rps = np.diff(np.searchsorted(done, edges, side="right")) / width
    middles = (edges[:-1] + edges[1:]) / 2
    waiting = np.searchsorted(sends, middles, side="right") - np.searchsorted(left, middles, side="right")
    base = float(ok_rps[:BASE_BLOCKS].mean())
    end = float(ok_rps[-BASE_BLOCKS:].mean())
    fell_at = _fell_at(ok_rps, waiting, base)
    # under the answered rate, and a real fall (noise around a capacity at the ceiling is not a tip)
    tips_at = (_fell_at(ok_rps, waiting, min(capacity_rps, (1 - FALL) * base), 0.0)
               if fell_at is not None else None)
    max_size, advice = _advice(base, end, (fell_at, tips_at), capacity_rps, latency_bound_s)
    if uncapped is not None and max_size is not None:
        advice = _in_front(advice, max_size, uncapped, own_cap, own_now)
    eta = eta_accuracy(measured)
    return Overload(
        rate_rps=rate_rps, capacity_rps=capacity_rps, base_rps=base, end_rps=end, fell_at_waiting=fell_at,
        max_waiting=int(waiting.max()), series=[[float(m - t0), float(x), float(w)]
                                               for m, x, w in zip(middles, ok_rps, waiting, strict=True)],
        max_size=max_size, advice=advice, eta_ratio=eta[0], eta_requests=eta[1], eta_finding=eta[2],
        cap_server=uncapped or "",
        tips_at_waiting=tips_at,
    )


#: failures that are the server's answer: the request left its queue then (a refusal past a queue cap, a
#: job that ran and failed); a timeout, a deadline or a cancel may leave it waiting there
ANSWERED: frozenset[str | None] = frozenset({"connect", "http_4xx", "http_5xx", "queue_full", "server_error"})


def _left_queue(record: RequestRecord, has_start: bool) -> float:
    at = record.started_at_s if has_start else None
    if at is None and record.completed_at_s is not None and (record.ok or record.error_kind in ANSWERED):
        at = record.completed_at_s
    return float(at) if at is not None else float("inf")


def _fell_at(ok_rps: np.ndarray, waiting: np.ndarray, level: float, fall: float = FALL) -> int | None:
    """Waiting count where the 3-slice mean past the base first drops `fall` under `level` (None: never)."""
    smooth = np.convolve(ok_rps, np.ones(3) / 3, mode="valid")  # slice i+1's neighbourhood
    for i, value in enumerate(smooth):
        if i + 1 >= BASE_BLOCKS and value < (1 - fall) * level:
            return int(waiting[i + 1])
    return None


def _advice(base: float, end: float, where: tuple[int | None, int | None], capacity: float,
            bound_s: float | None) -> tuple[int | None, str]:
    """The max_size advice: under the tipping point at the answered rate, else the wait's bound."""
    fell_at, tips_at = where
    fell = (f"past about {fell_at} waiting, throughput fell {1 - end / base:.0%} ({base:.3g} -> {end:.3g} "
            "ok/s)" if fell_at is not None and base > 0 else "")
    if fell and tips_at is not None:
        cap = max(1, int(tips_at * 0.8))
        return cap, (f"{fell}; past about {tips_at} waiting it served fewer than the capacity's "
                     f"{capacity:.3g} req/s, so at that rate a queue that long never drains: set "
                     f"max_size={cap} so a burst is turned away before it gets there")
    if bound_s is None:
        held = f"{fell}, but stayed above the capacity's {capacity:.3g} req/s" if fell else \
            f"throughput held at {end:.3g} ok/s as the queue grew"
        return None, f"{held}: a max_size only bounds the wait"
    cap = max(1, int(capacity * bound_s))
    held = (f"{fell}, but stayed above the capacity's {capacity:.3g} req/s (a burst drains at that rate)"
            if fell else f"throughput held ({base:.3g} -> {end:.3g} ok/s) as the queue grew")
    return cap, (f"{held}: set max_size={cap} (capacity {capacity:.3g} req/s x the {bound_s:g} s latency "
                 "bound) so that whoever gets in is served within the bound and the rest are told at once")


def _in_front(advice: str, cap: int, server: str, own_cap: str = "", now: str = "") -> str:
    """The advice for a server without Gradio's max_size: its own setting (`own_cap`), else a proxy."""
    head = advice.split(": set max_size=", 1)[0]
    if own_cap:
        return (f"{head}: {own_cap_lead(server, now)}: "
                f"{own_cap.format(waiting=cap)}, so that whoever gets in is served within the bound and "
                "the rest are told at once")
    return (f"{head}: {server} has no queue cap (Gradio's max_size), so put one in front of it: a proxy "
            f"that queues at most {cap} requests (or a client timeout at the latency bound) serves whoever "
            "gets in within the bound and tells the rest at once")


def eta_accuracy(records: Sequence[RequestRecord]) -> tuple[float | None, int, str]:
    """(median server ETA / median real wait, requests compared, the finding in words)."""
    pairs = [(r.rank_eta_s, r.started_at_s - r.estimation_at_s) for r in records
             if r.rank_eta_s is not None and r.started_at_s is not None and r.estimation_at_s is not None
             and r.started_at_s - r.estimation_at_s >= MIN_WAIT_S]
    if len(pairs) < 10:
        return None, len(pairs), ""
    eta = float(np.median([p[0] for p in pairs]))
    real = float(np.median([p[1] for p in pairs]))
    ratio = eta / real if real > 0 else None
    if ratio is None:
        return None, len(pairs), ""
    way = "longer" if ratio >= 1 else "shorter"
    times = ratio if ratio >= 1 else 1 / ratio
    return ratio, len(pairs), (f"the ETA the server shows users (rank_eta, median {eta:.2g} s) was "
                               f"{times:.1f}x {way} than their real wait (median {real:.2g} s, "
                               f"{len(pairs)} requests that waited)")
