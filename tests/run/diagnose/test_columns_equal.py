"""The diagnosis, the app notes, steadiness and "alongside" are the golden ones, from every source.

Over many seeded shapes of run, every finding's to_dict(), note, Steadiness.to_dict(), Alongside.to_dict(),
phase median and demand is computed from the records, from their columns (Columns.of) and from
records.parquet (Columns.read, a few columns at a time), and must equal the stored golden output
(tests/golden.py; written when the columns replaced the record-by-record code and equal to its figures).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qbench.run.diagnose import app_errors, limits, per_endpoint
from qbench.run.diagnose import phases as diagnose_phases
from qbench.run.records.columns import Columns, Held
from qbench.run.records.schema import RequestRecord, read_records, write_parquet
from qbench.run.results import alongside, steady
from qbench.run.results.summary import Summary, summarize
from tests import golden
from tests.run.conftest import scenario
from tests.run.diagnose.test_limits import reference_status, shared_cpu, usage_server
from tests.run.diagnose.test_limits_closed import closed_loop
from tests.run.results.test_steady import leaking, queue

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from report_synth import simulate  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-2026-11-26"
NGINX = {"front": {"url": "http://127.0.0.1:7860", "server": "nginx/1.22.1", "upstream": "127.0.0.1:7861",
                   "qbench": True, "upstreams": ["127.0.0.1:7861", "127.0.0.1:7862"]}}
LOST = "404: Not Found: session not found: the server that answered the stream has no message queue"
MISSED = "input 'image': file '/tmp/u/ab/image-2-0.jpeg' was not uploaded to this server"
CUT = "download of output 0 ended at 1024 of its Content-Length 4096 bytes"
MESSAGES = ("Error", " Error ", None, "ValueError: bad input", "ValueError: bad input ", LOST, MISSED, "None")
ENDPOINTS = ("chat", "embed", "page /")
SCENARIO = scenario(endpoint={"api_name": "predict"}, payload={"inputs": [{"text": {"words": [2, 2]}}]},
                    load={"burst": 1, "timeout": 30})


def gradio_like(seed: int, n: int = 900, *, endpoints: int = 1, rate: float = 40.0, phases: str = "",
                closed: bool = False, errors: float = 0.1, warmup: float = 0.1, joins: bool = True,
                starts: bool = True, unsent: float = 0.01, raising: bool = False) -> list[RequestRecord]:
    """A queue of a few workers (service growing with the jobs running) under an open or closed loop,
    every kind of error with its partial phases (`raising`: mostly the app's), streams and tokens,
    journeys, and the server's phases (`phases`: "" none, "gradio" its trace, "reference" the reference
    server's with forward passes)."""
    rng = np.random.default_rng(seed)
    workers, base = int(rng.integers(1, 5)), float(rng.uniform(0.01, 0.06))
    free, users_free = np.zeros(workers), np.zeros(8)
    t, records = 0.0, []
    for i in range(n):
        user = i % 8
        if closed:
            intended = sent = float(users_free[user]) + float(rng.uniform(0, 0.002))
        else:
            t += float(rng.exponential(1 / rate))
            intended, sent = t, t + float(rng.exponential(0.002))
        w = int(np.argmin(free))
        start = max(sent + 0.002, float(free[w]))
        busy = int((free > start).sum())
        service = base * (1 + 0.3 * busy) * float(rng.uniform(0.7, 1.3))
        done = start + service
        endpoint = ENDPOINTS[int(rng.integers(0, endpoints))] if endpoints > 1 else "predict"
        fields: dict[str, Any] = dict(
            request_id=i, user_id=user, session_id=f"s{user}", endpoint=endpoint,
            warmup=i < warmup * n, intended_at_s=intended, sent_at_s=sent, outcome="ok",
            joined_at_s=sent + 0.001 if joins else None, rank=int(rng.integers(0, 6)) if i % 3 else None,
            started_at_s=start if starts else None, completed_at_s=done, outputs=int(rng.integers(0, 3)),
            journey_id=i // 4, step=i % 4, turn=0)
        if i % 5 == 0:
            fields |= dict(first_output_at_s=start + service / 3, output_tokens=int(rng.integers(1, 40)),
                           tokens_from="chunks", result_at_s=done - service / 10)
        if phases:
            fields |= _phases(rng, phases, service, start - sent)
        roll = float(rng.uniform())
        if roll < errors:
            fields |= _error(rng, 0 if raising and i % 3 else i, sent, start, done)
        elif roll < errors + unsent:
            fields |= dict(sent_at_s=None, joined_at_s=None, started_at_s=None, completed_at_s=None,
                           outcome="error", error_kind="connect", error_message="refused")
        if fields["completed_at_s"] is not None and fields.get("error_kind") not in ("queue_full", "connect"):
            free[w] = fields["completed_at_s"]
        users_free[user] = fields["completed_at_s"] or sent
        records.append(RequestRecord(**fields))
    return records


def _phases(rng: np.random.Generator, kind: str, service: float, wait: float) -> dict[str, Any]:
    pre, post = service * float(rng.uniform(0.05, 0.6)), service * float(rng.uniform(0.05, 0.3))
    fn = max(service - pre - post, 1e-4)
    total = service * (0.1 if kind == "client" else 0.98)  # "client": most of it outside the server
    out = dict(server_queue_wait_s=max(wait - 0.001, 0.0), server_preprocess_s=pre, server_fn_s=fn,
               server_postprocess_s=post, server_total_s=total)
    if rng.uniform() < 0.3:
        out["server_upload_s"] = float(rng.uniform(0, 0.01))
    if kind == "reference":
        size = int(rng.choice([0, 1, 4, 8]))
        out |= dict(server_prepare_s=pre / 2, server_batch_prepare_s=fn / 10, server_h2d_s=fn / 20,
                    server_forward_s=fn / 2, server_batch_size=size or None)
        if rng.uniform() < 0.2:
            out["server_fn_s"] = None  # the forward pass without a function time: the collation's
    return out


def _error(rng: np.random.Generator, i: int, sent: float, start: float, done: float) -> dict[str, Any]:
    kind = ["server_error", "server_error", "queue_full", "timeout", "deadline", "stream_broken",
            "interrupted", "cancelled"][i % 8]
    message = MESSAGES[int(rng.integers(0, len(MESSAGES)))] if kind == "server_error" else (
        CUT if kind == "stream_broken" and rng.uniform() < 0.5 else f"{kind} after {i}")
    out: dict[str, Any] = dict(outcome="error", error_kind=kind, error_message=message)
    if kind == "queue_full":
        out |= dict(started_at_s=None, completed_at_s=sent + 0.003, http_status=503)
    elif kind == "deadline" and rng.uniform() < 0.3:
        out |= dict(completed_at_s=None)
    elif kind in ("timeout", "interrupted"):
        out |= dict(started_at_s=None if rng.uniform() < 0.5 else start, completed_at_s=done + 1.0)
    return out


def bench_run(seed: int) -> list[RequestRecord]:
    """bench/end_of_run.py's generated run (two endpoints, errors of five kinds, warm-up)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    import end_of_run

    rng = np.random.default_rng(seed)
    records, _ = end_of_run.chunk_records(rng, 0, 3000, 0.0, 200.0, 1.0, end_of_run.warmup(3000, 200.0))
    return records


def real(name: str) -> tuple[list[RequestRecord], dict[str, Any] | None]:
    """A real run's records and its server (a GPU, the reference server's /status at both ends)."""
    return read_records(FIXTURES / name), json.loads((FIXTURES / name / "run.json").read_text())["server"]


def mix_server(shared: bool) -> dict[str, Any]:
    """A reference server's settings for the mix's endpoints (a shared concurrency_id or not)."""
    fns = [{"api_name": e, "concurrency_limit": 2, "concurrency_id": "g" if shared else None}
           for e in ENDPOINTS]
    deps = [{"id": n, "api_name": e} for n, e in enumerate(ENDPOINTS)]
    return {"fn_index": 0, "config": {"dependencies": deps, "components": [{"id": 1, "type": "state"}]},
            "mix": {e: {"fn_index": n} for n, e in enumerate(ENDPOINTS)},
            "status": {"settings": {"functions": fns, "queue": {"default_concurrency_limit": 1}}}}


RUNS: dict[str, Callable[[], tuple[list[RequestRecord], dict[str, Any] | None]]] = {
    "open, one endpoint": lambda: (gradio_like(1), None),
    "open, saturated, slots": lambda: (gradio_like(2, rate=400.0), reference_status(4)),
    "open, no start events (HTTP)": lambda: (gradio_like(3, starts=False, joins=False), None),
    "open, no joins": lambda: (gradio_like(4, joins=False, rate=200.0), usage_server(9.5, 1.0)),
    "closed loop": lambda: (gradio_like(5, closed=True, errors=0.0, unsent=0.0), usage_server(2.0)),
    "closed loop, errors": lambda: (gradio_like(5, closed=True), usage_server(2.0)),
    "open, headroom": lambda: (gradio_like(16, rate=4.0, phases="gradio", errors=0.01), None),
    "time outside the server": lambda: (gradio_like(18, rate=4.0, phases="client", errors=0.01), None),
    "the app raised, several endpoints": lambda: (gradio_like(17, endpoints=2, errors=0.9, raising=True),
                                                  mix_server(False)),
    "gradio trace": lambda: (gradio_like(6, phases="gradio", rate=300.0), None),
    "reference phases, GPU": lambda: (gradio_like(7, phases="reference", rate=300.0),
                                      usage_server(9.5, gpu_busy_s=9.0)),
    "reference phases, closed": lambda: (gradio_like(8, phases="reference", closed=True, errors=0.0,
                                                     unsent=0.0), usage_server(3.0)),
    "mix of three, shared group": lambda: (gradio_like(9, 1500, endpoints=3, rate=300.0), mix_server(True)),
    "mix of three, phases": lambda: (gradio_like(10, 1500, endpoints=3, phases="gradio"), mix_server(False)),
    "mix behind nginx": lambda: (gradio_like(11, 1200, endpoints=2, errors=0.3), NGINX),
    "all errors": lambda: (gradio_like(12, 300, errors=1.0), None),
    "all warm-up": lambda: (gradio_like(13, 100, warmup=1.0), None),
    "too few": lambda: (gradio_like(14, 15), None),
    "bench generated": lambda: (bench_run(15), None),
    "report_synth": lambda: (simulate(n=600, max_queue=4, fail_every=7), None),
    "shared cpu": lambda: (shared_cpu(), reference_status(4)),
    "closed loop of 8 on 2": lambda: (closed_loop(), reference_status(2)),
    "steady queue": lambda: (queue(48, 10), None),
    "queue without starts": lambda: (queue(48, 10, start_events=False), None),
    "leaking": lambda: (leaking(24, 60, 0.2), None),
    "real GPU b8": lambda: real("image-b8-cl1-bf16"),
    "real GPU b32": lambda: real("image-b32-cl1-bf16"),
}


def _figures(records: Any, summary: Summary, server: dict[str, Any] | None) -> dict[str, Any]:
    """Every figure over `records` (a list or Columns); the summary is another part's."""
    starts = {e: 5.0 * n for n, e in enumerate(ENDPOINTS)}
    out = {
        "diagnose_run": per_endpoint.diagnose_run(records, summary, server, ["lagging"], cpus=4),
        "diagnose": limits.diagnose(records, summary, server, describe=False),
        "closed_loop_users": limits.closed_loop_users(records),
        "phase_medians": diagnose_phases.phase_medians(records),
        "demand": diagnose_phases.demand(records),
        "explain": app_errors.explain(records, SCENARIO, server),
        "split_sessions": [app_errors.split_sessions(records, server, short=s) for s in (False, True)],
        "most_open": app_errors.most_open(records),
        "alongside": alongside.alongside(records, starts),
        "alongside_end": alongside.alongside(records, starts, 4.0),
    }
    for margin, bound in ((0.025, None), (0.1, 1.0), (0.005, 0.2)):
        out[f"steadiness {margin} {bound}"] = steady.steadiness(records, margin, bound_s=bound)
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_every_figure_is_the_golden_one_from_every_source(name: str, tmp_path: Path) -> None:
    records, server = RUNS[name]()
    summary = summarize(records, None)
    write_parquet(records, tmp_path / "records.parquet")
    for cols in (records, Columns.of(records), Columns.read(tmp_path, keep=2)):
        golden.check("diagnose", name, _figures(cols, summary, server))


def test_held_columns_read_each_label_column_once(tmp_path: Path) -> None:
    """The diagnosis asks for the outcome, error kind and endpoint of every request many times: Held
    keeps each label column (and the measured mask) once read, whatever the view's own cache keeps."""
    records = gradio_like(20, 300, endpoints=2)
    write_parquet(records, tmp_path / "records.parquet")
    inner = Columns.read(tmp_path, keep=2)
    asked: list[str] = []
    read = inner.labels
    inner.labels = lambda name: asked.append(name) or read(name)  # type: ignore[method-assign]
    held = Held(inner)
    for _ in range(3):
        codes, names = held.labels("endpoint")
        expected_codes, expected_names = Columns.of(records).labels("endpoint")
        assert names == expected_names and (codes == expected_codes).all()
        assert (held.ok() == Columns.of(records).ok()).all()
        assert (held.measured() == Columns.of(records).measured()).all()
    assert sorted(asked) == ["endpoint", "outcome"]
    per_endpoint.diagnose_run(held, summarize(records, None))  # every endpoint's diagnosis, too
    assert len(asked) == len(set(asked)), asked
