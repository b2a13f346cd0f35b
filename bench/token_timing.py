"""Do qbench's TTFT and inter-token figures agree with the server's own per-token timestamps?

Starts the reference server's `tokens` preset (a synthetic LLM: first token after 50 ms, then one
every 20 ms, 8 streams at once) as a subprocess, drives its OpenAI front with qbench
(`protocol: openai`, streamed, closed-loop users), then reads the server's token log
(`GET /status/tokens`: when each request reached the handler and when each content chunk was handed
to the socket, on the same monotonic clock) and joins it to qbench's records by `X-Request-Id`.
Per request, both sides' figures are computed the same way:

    TTFT   client: first content chunk received - request sent     server: first chunk sent - received
    ITL    the median (and mean) of the gaps between content chunks, per request

and the table prints each side's median over requests, the median client - server difference and
its 90th percentile of |difference|. The TTFT difference is the loopback round trip plus both sides'
HTTP handling; the ITL difference is what qbench adds to a gap by reading the stream. A second table
compares the run's ITL over EVERY gap of the joined requests: qbench's summary figure (its records'
gap histograms merged: qbench.run.results.summary.itl_stats) against the exact p50/p90/p99 of the
server's own gaps, and their difference. Exit 1 when a joined request's token counts differ (a
correctness failure), 0 otherwise.

    .venv/bin/python bench/token_timing.py                          # 4 users, 200 requests (~1 min)
    .venv/bin/python bench/token_timing.py --users 8 --requests 200  # the RESULTS.md table (~1 min)
    .venv/bin/python bench/token_timing.py --users 8 --requests 200 --pin  # server and qbench a core each

`--pin` is for a dedicated host: on the shared 2-core box it made the p99 worse (RESULTS.md), as a
process held to one core cannot leave it when another process takes it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from qbench.run.pipeline import run_scenario  # noqa: E402
from qbench.run.protocols.openai import TokenStream, percentile, request_id_value  # noqa: E402
from qbench.run.records.columns import Columns  # noqa: E402
from qbench.run.records.schema import RequestRecord  # noqa: E402
from qbench.run.results.summary import itl_stats  # noqa: E402
from qbench.run.scenario.schema import parse_scenario  # noqa: E402
from qbench.tune.servers.server_process import reference_server_process


def drive(url: str, out: Path, users: int, requests: int, max_tokens: int,
          client_gaps: dict[int, list[float]] | None = None) -> list[RequestRecord]:
    """qbench's run (one generator process, in this one); `client_gaps`, when given, gets each request's
    exact gaps as qbench's stream reader saw them (before the record's histogram), by request id."""
    spec = parse_scenario({
        "name": "token-timing", "protocol": "openai",
        "endpoint": {"model": "tokens", "max_tokens": max_tokens, "stream": True},
        "payload": {"seed": 3, "inputs": [{"text": {"words": [4, 12]}}]},
        "load": {"users": users, "requests": requests, "timeout": 60},
    })
    if client_gaps is None:
        return run_scenario(spec, target=url, out_dir=out, live=False).records
    fill = TokenStream.fill

    def keep(stream: TokenStream, record: RequestRecord) -> None:
        client_gaps[record.request_id] = [b - a for a, b in zip(stream.times, stream.times[1:], strict=False)]
        fill(stream, record)

    TokenStream.fill = keep  # type: ignore[method-assign, assignment]
    try:
        return run_scenario(spec, target=url, out_dir=out, live=False).records
    finally:
        TokenStream.fill = fill  # type: ignore[method-assign]


def server_timelines(url: str, since: float) -> dict[str, dict[str, Any]]:
    """The server's timelines of requests received after `since` (perf_counter), by X-Request-Id."""
    log = httpx.get(url + "/status/tokens", timeout=10, trust_env=False).json()
    return {t["request_id"]: t for t in log["timelines"] if t["received_at_s"] >= since}


def gaps_p50(times: list[float]) -> float | None:
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
    return percentile(gaps, 0.5) if gaps else None


def join(records: list[RequestRecord], timelines: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per ok record that the server logged: both sides' TTFT, ITL p50/mean, token counts."""
    rows = []
    for r in records:
        t = timelines.get(request_id_value(r.request_id))
        if not r.ok or t is None or r.first_output_at_s is None or r.sent_at_s is None:
            continue
        times = t["token_at_s"]
        server_gaps = len(times) - 1
        rows.append({
            "request_id": r.request_id,
            "client_tokens": r.outputs, "server_tokens": len(times),
            "client_ttft_s": r.first_output_at_s - r.sent_at_s,
            "server_ttft_s": times[0] - t["received_at_s"] if times else None,
            "client_itl_p50_s": r.itl_p50_s, "server_itl_p50_s": gaps_p50(times),
            "client_itl_mean_s": r.itl_mean_s,
            "server_itl_mean_s": (times[-1] - times[0]) / server_gaps if server_gaps > 0 else None,
        })
    return rows


def agreement(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per figure: client median, server median, median(client - server), p90 |client - server| (s)."""
    out = {}
    for figure in ("ttft", "itl_p50", "itl_mean"):
        pairs = [(row[f"client_{figure}_s"], row[f"server_{figure}_s"]) for row in rows]
        pairs = [(c, s) for c, s in pairs if c is not None and s is not None]
        if not pairs:
            continue
        diffs = [c - s for c, s in pairs]
        out[figure] = {
            "client_median_s": statistics.median(c for c, _ in pairs),
            "server_median_s": statistics.median(s for _, s in pairs),
            "median_diff_s": statistics.median(diffs),
            "p90_abs_diff_s": percentile(sorted(abs(d) for d in diffs), 0.9),
            "requests": float(len(pairs)),
        }
    return out


def all_gaps(records: list[RequestRecord], timelines: dict[str, dict[str, Any]],
             client_gaps: dict[int, list[float]] | None = None) -> dict[str, dict[str, float]]:
    """The run's ITL over every gap of the joined ok requests: qbench's summary figure (merged
    histograms), the exact type-7 percentiles of the server's gaps, p50/p90/p99 (s), and with
    `client_gaps` the exact percentiles of qbench's own gaps (what the histograms stand for)."""
    joined = [r for r in records if r.ok and request_id_value(r.request_id) in timelines]
    logs = [timelines[request_id_value(r.request_id)]["token_at_s"] for r in joined]
    server = sorted(b - a for times in logs for a, b in zip(times, times[1:], strict=False))
    if not server:
        return {}
    client = itl_stats(Columns.of(joined))
    exact = sorted(g for r in joined for g in (client_gaps or {}).get(r.request_id, []))
    p99s = sorted(r.itl_p99_s for r in joined if r.itl_p99_s is not None)
    out = {}
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        ours = getattr(client, name)
        theirs = percentile(server, q)
        before = percentile(p99s, q) if name != "p50" and p99s else None  # qbench <= schema v5's figure
        out[name] = {"qbench_s": ours, "server_s": theirs, "diff_s": ours - theirs,
                     **({"per_request_p99s_s": before} if before is not None else {})}
        if exact:
            out[name]["qbench_exact_s"] = percentile(exact, q)
    out["gaps"] = {"qbench": float(client.count), "server": float(len(server))}
    return out


def render(result: dict[str, Any]) -> str:
    lines = [f"{'figure':<10} {'qbench p50':>11} {'server p50':>11} {'median diff':>12} {'p90 |diff|':>11}"]
    for figure, a in result["agreement"].items():
        ms = {key: value * 1e3 for key, value in a.items()}
        lines.append(f"{figure:<10} {ms['client_median_s']:>8.3f} ms {ms['server_median_s']:>8.3f} ms "
                     f"{ms['median_diff_s']:>+9.3f} ms {ms['p90_abs_diff_s']:>8.3f} ms")
    lines.append(f"requests joined: {result['joined']} of {result['records']} "
                 f"(token counts differ on {result['token_mismatches']})")
    every = result.get("all_gaps") or {}
    if every:
        gaps = every["gaps"]
        lines.append(f"ITL over every gap ({gaps['qbench']:.0f} gaps by qbench, {gaps['server']:.0f} by the "
                     "server)")
        lines.append(f"{'':<10} {'qbench':>11} {'server':>11} {'difference':>12} {'before (v5)':>12} "
                     f"{'qbench exact':>13}")
        for name in ("p50", "p90", "p99"):
            row = {key: value * 1e3 for key, value in every[name].items()}
            before = f"{row['per_request_p99s_s']:>9.3f} ms" if "per_request_p99s_s" in row else f"{'-':>12}"
            exact = f"{row['qbench_exact_s']:>10.3f} ms" if "qbench_exact_s" in row else f"{'-':>13}"
            lines.append(f"{'ITL ' + name:<10} {row['qbench_s']:>8.3f} ms {row['server_s']:>8.3f} ms "
                         f"{row['diff_s']:>+9.3f} ms {before} {exact}")
        lines.append("before (v5): that percentile of the requests' own p99 gaps, qbench's figure before the "
                     "gap histograms; qbench exact: its gaps' exact percentile (the histograms' error is the "
                     "difference from the first column, the host's scheduling of qbench the rest)")
    if result.get("load_average"):
        lines.append(f"host load average (1 min) at the end: {result['load_average']:.2f}")
    return "\n".join(lines)


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` (and of its children) onto `cpus` (Linux; threads made later
    inherit it from the thread that makes them)."""
    import psutil

    for proc in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        for thread in proc.threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread.id, cpus)


def measure(users: int, requests: int, max_tokens: int, pinned: bool = False) -> dict[str, Any]:
    """`pinned`: the server on the first core and qbench on the second, so neither waits for the other's
    core (the host's other processes still may); this process's cores are given back after."""
    own = os.sched_getaffinity(0) if pinned else set()
    with reference_server_process("tokens") as server, tempfile.TemporaryDirectory() as tmp:
        url = server.base_url
        try:
            if pinned:
                first, second, *_ = sorted(own)
                assert server.pid is not None
                pin(server.pid, {first})
                pin(os.getpid(), {second})
            since = time.perf_counter()
            client_gaps: dict[int, list[float]] = {}
            records = drive(url, Path(tmp) / "run", users, requests, max_tokens, client_gaps)
            timelines = server_timelines(url, since)
        finally:
            if pinned:
                pin(os.getpid(), own)
        rows = join(records, timelines)
    mismatches = sum(1 for row in rows if row["client_tokens"] != row["server_tokens"])
    return {"users": users, "requests": requests, "max_tokens": max_tokens, "records": len(records),
            "joined": len(rows), "token_mismatches": mismatches, "agreement": agreement(rows),
            "all_gaps": all_gaps(records, timelines, client_gaps), "load_average": os.getloadavg()[0],
            "pinned": pinned}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--users", type=int, default=4, help="closed-loop users (default 4; the preset streams 8)")
    p.add_argument("--requests", type=int, default=200, help="requests in all (default 200)")
    p.add_argument("--max-tokens", type=int, default=32, help="max_tokens per request (default 32)")
    p.add_argument("--json", type=Path, help="also write the result as JSON here")
    p.add_argument("--pin", action="store_true",
                   help="the server on one core, qbench on another (Linux, 2 cores or more; for a "
                        "dedicated host: on a shared one it made the tail worse)")
    args = p.parse_args(argv)
    if args.pin and (not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2):
        p.error("--pin needs Linux and 2 cores or more")
    result = measure(args.users, args.requests, args.max_tokens, args.pin)
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 1 if result["token_mismatches"] or not result["joined"] else 0


if __name__ == "__main__":
    sys.exit(main())
