"""`qbench soak`: a run as `qbench run` makes it, with a health sampler (`health.jsonl`) and a stuck-queue
stop; then `judge_soak`: the samples and records -> `SoakReport`, a drift verdict per signal (`soak.json`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psutil

from qbench.errors import ScenarioError, SloViolation
from qbench.run.json_values import Readable
from qbench.run.load.generator import LiveStats
from qbench.run.options import OptionsRun, RunOptions, run_with_options
from qbench.run.pipeline import load_scenario
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord
from qbench.run.results.files import Writer, new_folder
from qbench.run.soak.drift import Signal, Verdict, judge
from qbench.run.soak.health import (
    FAILING_PREFIX,
    STUCK_PREFIX,
    HealthSample,
    HealthSampler,
    StuckWatch,
    read_health,
)
from qbench.run.summary_file import SummaryFile

MIB = 2**20
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", ""})
WARMUP_SHARE, WARMUP_MAX_S = 0.2, 300.0  # default warm-up cut: 20% of the run, at most 5 minutes
SLICES = 20  # default per-slice series: the run in 20 slices (at least one sample interval each)

GIB = 2**30
# What matters (qbench.run.soak.drift.Signal): memory 2% of its ceiling a day (the --limit, else the
# host's memory), at least 64 MiB and at most 1 GiB; counts a few dozen a day; per-request figures over
# the run, as before: 10% of p95 latency, 5% of throughput, 1 point of errors.


def _memory(name: str, key: str) -> Signal:
    return Signal(name, key, "B", 64 * MIB, 0.02, matters_cap=GIB)


HEALTH_SIGNALS = (
    _memory("server RSS", "rss_bytes"),
    _memory("server RSS (/status)", "status_rss_bytes"),
    Signal("server open files", "open_files", "", 50),
    Signal("server threads", "threads", "", 50),
    Signal("server child processes", "children", "", 5),
    Signal("server queue (events waiting)", "status_waiting", "", 2),
    Signal("file cache", "cache_bytes", "B", 256 * MIB, 0.02, matters_cap=GIB),
    _memory("qbench's own RSS", "qbench_rss_bytes"),
    Signal("qbench's open files", "qbench_open_files", "", 50),
)
SLICE_SIGNALS = (
    Signal("p95 latency", "p95_latency_s", "s", 0.005, 0.10, share_of="level"),
    Signal("throughput", "throughput_rps", "req/s", 0.0, 0.05, share_of="level"),
    Signal("errors", "error_pct", "%", 1.0),
    Signal("server queue at join (its estimation)", "queue_size", "", 2),
)
MEMORY_KEYS = frozenset({"rss_bytes", "status_rss_bytes", "qbench_rss_bytes"})
LIMIT_KEYS = {"rss": "rss_bytes", "cache": "cache_bytes", "files": "open_files", "p95": "p95_latency_s"}


@dataclass(frozen=True)
class SoakOptions:
    """How to watch the server during a soak run (the run itself is RunOptions)."""

    interval_s: float = 5.0  # between health samples
    warmup_s: float | None = None  # the cut before the steady part (None: 20% of the run, <= 300 s)
    stuck_after_s: float = 60.0  # no request completing for this long while requests go out: stuck
    pid: int | None = None  # the server's process (its tree is sampled); None: /status only
    cache_folder: Path | None = None  # the app's file cache (GRADIO_TEMP_DIR)
    limits: dict[str, float] = field(default_factory=dict)  # signal key -> limit (rss_bytes: 16 GiB)
    memory_bytes: float | None = None  # the host's memory, memory's ceiling without a --limit (None: read it)
    slo_p95_s: float | None = None  # the scenario's SLO on p95 latency: its ceiling without a --limit


@dataclass(frozen=True)
class SoakReport(Readable, tolerant=True):
    """What a soak run found: a verdict per signal, a stuck queue, and the series they were read from."""

    verdicts: list[Verdict] = field(default_factory=list)
    stuck: str | None = None  # the stuck-queue (or every-request-failing) finding the run ended on
    steady_from_s: float = 0.0  # the warm-up cut
    duration_s: float = 0.0  # the samples' span
    requests: int = 0  # finished requests
    rate_rps: float | None = None  # completions per second over the steady part
    samples: int = 0  # health samples
    slices: list[dict[str, float | None]] = field(default_factory=list)  # per slice: t_s, requests, ...
    watched: str | None = None  # whose memory was watched, or why the server's could not be (and how)

    def lines(self) -> list[str]:
        """The findings in words: the stuck queue first, then every signal."""
        head = [f"STOPPED: {self.stuck}"] if self.stuck else []
        cut = (f"steady part from {self.steady_from_s:.0f} s of {self.duration_s:.0f} s (warm-up cut), "
               f"{self.requests:,} requests, {self.samples} health samples")
        short = [v.signal for v in self.verdicts if v.kind == "short"]
        tail = [f"too few samples after the warm-up to judge: {', '.join(short)}"] if short else []
        watched = [self.watched] if self.watched else []
        return [*head, cut, *watched, *(v.text() for v in self.verdicts if v.kind != "short"), *tail]

    def verdict(self, key: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        return {"verdicts": [v.to_dict() for v in self.verdicts], "stuck": self.stuck,
                "steady_from_s": self.steady_from_s, "duration_s": self.duration_s, "requests": self.requests,
                "rate_rps": self.rate_rps, "samples": self.samples, "slices": self.slices,
                "watched": self.watched, "lines": self.lines()}


@dataclass
class SoakRun:
    """A finished soak run: the run (as `qbench run` leaves it) and its report."""

    done: OptionsRun
    report: SoakReport

    def error(self) -> SloViolation | None:
        """A stuck queue (or every request failing) fails the run (exit 3), whatever the SLO said."""
        return SloViolation(f"the soak run stopped: {self.report.stuck}") if self.report.stuck else None


def run_soak(options: RunOptions, soak: SoakOptions) -> SoakRun:
    """Run `options` with the health sampler and the stuck-queue test; judge it; write soak.json."""
    if options.out is None:
        name = options.scenario.stem if options.scenario else (options.api or "app").lstrip("/")
        options = replace(options, out=new_folder("soak", name))
    assert options.out is not None
    url = options.target or (load_scenario(options.scenario, options.overrides()).target
                             if options.scenario else None)
    soak, watched = find_server(soak, url)
    sampler = HealthSampler(options.out / "health.jsonl", interval_s=soak.interval_s, pid=soak.pid,
                            status_url=url, cache_folder=soak.cache_folder)
    stuck = StuckWatch(soak.stuck_after_s)
    started: list[bool] = []

    def hook(stats: LiveStats) -> str | None:
        if not started:  # the target answered and the load began: sample from here
            started.append(True)
            sampler.start()
        sampler.update(stats)
        return stuck.check(stats)

    try:
        done = run_with_options(options, stop_when=hook)
    finally:
        sampler.stop()
    reason = done.result.outcome.stop_reason
    finding = reason if reason and reason.startswith((STUCK_PREFIX, FAILING_PREFIX)) else None
    health = read_health(done.result.run_dir / "health.jsonl")
    slo = done.scenario.slo
    if soak.slo_p95_s is None and slo is not None and slo.p95_latency_s is not None:
        soak = replace(soak, slo_p95_s=slo.p95_latency_s)  # p95 latency's ceiling: the run's own SLO
    report = judge_soak(health, done.result.columns(), soak, finding)
    report = replace(report, watched=watched)
    write_report(done.result.run_dir, report)
    return SoakRun(done, report)


#: Names of proxies' processes: a port one of them owns is not the server's
PROXY_PROCESSES = frozenset({"nginx", "docker-proxy", "envoy", "haproxy", "traefik", "caddy", "httpd",
                             "apache2", "lighttpd", "openresty"})


def find_server(soak: SoakOptions, url: str | None) -> tuple[SoakOptions, str]:
    """The server's process to watch (`--pid`, else this machine's listener on the target's port, or the
    first upstream behind a local proxy) and a line naming it, or saying why none is watched."""
    if soak.pid is not None:
        return soak, f"watching the server's process tree: {describe_process(soak.pid)}"
    parts = urlsplit(url or "")
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    how = "give its --pid, or let qbench start it with --app APP"
    if host not in LOCAL_HOSTS:
        return soak, (f"the server's memory is not watched: {url} is not on this machine (only its /status, "
                      f"if it has one); run the soak on its machine with --pid or --app")
    pid = listening_pid(port)
    if pid is None:
        return soak, (f"the server's memory is not watched: no process qbench may read listens on port "
                      f"{port} (another user's, or a container's); {how}")
    name = _process_name(pid)
    if name not in PROXY_PROCESSES:
        return replace(soak, pid=pid), (f"watching the server's process tree: {describe_process(pid)}, found "
                                        f"listening on port {port}")
    behind = [(upstream, owner) for upstream in proxy_upstreams(pid)
              if (owner := listening_pid(upstream[1])) is not None]
    proxy = f"port {port} belongs to {name} (pid {pid}), a proxy"
    if not behind:
        return soak, (f"the server's memory is not watched: {proxy}, not the server, and qbench cannot see "
                      f"the servers behind it; {how}")
    (first, owner), others = behind[0], [f"{h}:{p}" for (h, p), _ in behind[1:]]
    rest = f"; its other upstreams ({', '.join(others)}) are not watched: --pid chooses one" if others else ""
    return replace(soak, pid=owner), (f"watching the server's process tree: {describe_process(owner)}, "
                                      f"{first[0]}:{first[1]} behind {proxy}{rest}")


def describe_process(pid: int) -> str:
    """'pid 123 (python app.py --port 7860)': the command line, shortened; the pid alone if unreadable."""
    try:
        command = " ".join(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return f"pid {pid}"
    command = command if len(command) <= 80 else command[:77] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def _process_name(pid: int) -> str:
    try:
        return psutil.Process(pid).name().lower()
    except (psutil.Error, OSError):
        return ""


def proxy_upstreams(pid: int) -> list[tuple[str, int]]:
    """An nginx's upstreams on this machine (`server HOST:PORT` in its `-c` config), in order; else []."""
    try:
        process = psutil.Process(pid)
        argv = process.cmdline()
        master = process.parent() if "-c" not in argv else None  # a worker: its master's command line
        argv = master.cmdline() if master is not None else argv
    except (psutil.Error, OSError):
        return []
    conf = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-c"), None)
    try:
        text = Path(conf).read_text(errors="replace") if conf else ""
    except OSError:
        return []
    found: list[tuple[str, int]] = []
    for block in re.findall(r"upstream\s+\S+\s*\{(.*?)\}", text, flags=re.DOTALL):
        for host, port in re.findall(r"^\s*server\s+([\w.\-\[\]:]+?):(\d+)\b", block, flags=re.MULTILINE):
            if host in LOCAL_HOSTS or host.startswith("127."):
                found.append((host, int(port)))
    return found


def listening_pid(port: int) -> int | None:
    """The pid of this machine's process listening on TCP `port` (None: none, or not readable)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    pids = {c.pid for c in connections if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
            and c.pid is not None}
    return min(pids) if pids else None


def write_report(run_dir: Path, report: SoakReport) -> None:
    """soak.json, and the report under `soak` in summary.json."""
    writer = Writer()
    writer.json(run_dir / "soak.json", report.to_dict())
    stored = SummaryFile.read(run_dir)
    if stored is not None:
        replace(stored, soak=report.to_dict()).write(run_dir, writer)


def read_report(run_dir: Path) -> SoakReport | None:
    """A soak run folder's soak.json (None: not a soak run)."""
    import json

    path = run_dir / "soak.json"
    return SoakReport.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def judge_soak(samples: Sequence[HealthSample], records: Columns | Sequence[RequestRecord], soak: SoakOptions,
               stuck: str | None = None) -> SoakReport:
    """The verdicts of a soak run from its health samples and records (read as columns, a few at a time)."""
    cols = Columns.of(records)
    completed = cols.floats("completed_at_s")
    finished = int(np.count_nonzero(~np.isnan(completed)))
    samples = _while_sending([s for s in samples if s.live])
    span = samples[-1].t_s if samples else (float(np.nanmax(completed)) if finished else 0.0)
    cut = soak.warmup_s if soak.warmup_s is not None else min(WARMUP_SHARE * span, WARMUP_MAX_S)
    rate = _steady_rate(samples, cut)
    t = [s.t_s for s in samples]
    x = [float(s.completed) for s in samples]
    verdicts = []
    for signal in HEALTH_SIGNALS:
        values = [getattr(s, signal.key) for s in samples]
        if signal.key == "status_rss_bytes" and any(s.rss_bytes is not None for s in samples):
            continue  # the process tree's RSS already counts it
        if any(v is not None for v in values):
            limit, source = _ceiling(signal.key, soak)
            verdicts.append(judge(signal, t, x, values, steady_from_s=cut, limit=limit, rate_rps=rate,
                                  limit_source=source))
    slices = slice_series(cols, max(soak.interval_s, span / SLICES))
    st = [float(s["t_s"] or 0.0) for s in slices]
    sx = [float(s["requests"] or 0.0) for s in slices]
    for signal in SLICE_SIGNALS:
        values = [s[signal.key] for s in slices]
        if any(v is not None for v in values):
            limit, source = _ceiling(signal.key, soak)
            verdicts.append(judge(signal, st, sx, values, steady_from_s=cut, limit=limit, rate_rps=rate,
                                  limit_source=source))
    return SoakReport(verdicts, stuck, cut, span, finished, rate, len(samples), slices)


def slice_series(records: Columns | Sequence[RequestRecord], slice_s: float) -> list[dict[str, float | None]]:
    """Per `slice_s` slice (by completion time): middle, requests finished, p95 latency of its ok requests,
    completions per second, error share (%), the median queue size announced at join."""
    cols = Columns.of(records)
    completed = cols.floats("completed_at_s")
    done = np.flatnonzero(~np.isnan(completed))
    if not done.size or slice_s <= 0:
        return []
    order = done[np.argsort(completed[done], kind="stable")]
    ends = completed[order]
    window = float(np.nanmax(cols.floats("intended_at_s")))  # whole slices of the send window (no drain)
    latency = cols.floats("latency_s")[order]
    ok = cols.ok()[order] & ~np.isnan(latency)
    queued = cols.floats("queue_size")[order]
    series: list[dict[str, float | None]] = []
    for k in range(max(int(window // slice_s), 1)):
        lo, hi = (int(i) for i in np.searchsorted(ends, [k * slice_s, (k + 1) * slice_s], side="left"))
        part_ok = latency[lo:hi][ok[lo:hi]]
        part_queued = queued[lo:hi][~np.isnan(queued[lo:hi])]
        n = hi - lo
        series.append({
            "t_s": (k + 0.5) * slice_s,
            "requests": float(hi),
            "p95_latency_s": float(np.percentile(part_ok, 95)) if part_ok.size else None,
            "throughput_rps": n / slice_s,
            "error_pct": 100.0 * (n - part_ok.size) / n if n else None,
            "queue_size": float(np.median(part_queued)) if part_queued.size else None,
        })
    return series


def parse_limits(items: Sequence[str]) -> dict[str, float]:
    """`--limit rss=16GiB` (also cache=, files=, p95=) -> {signal key: value}. Raises ScenarioError."""
    limits: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        key = LIMIT_KEYS.get(name.strip())
        if not sep or key is None:
            raise ScenarioError(f"--limit {item!r}: expected NAME=VALUE with NAME one of "
                                f"{', '.join(LIMIT_KEYS)}, e.g. rss=16GiB")
        match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B|B)?\s*", text, flags=re.IGNORECASE)
        if match is None:
            raise ScenarioError(f"--limit {item!r}: {text!r} is not a number (with B, KiB..TiB or KB..TB)")
        unit = (match.group(2) or "B").upper()
        scale = 1024 ** "BKMGT".index(unit[0]) if "I" in unit else 1000 ** "BKMGT".index(unit[0])
        limits[key] = float(match.group(1)) * scale
    return limits


def _while_sending(samples: Sequence[HealthSample]) -> list[HealthSample]:
    """The samples taken while requests went out, and the first after the last send (not the drain)."""
    if not samples:
        return []
    last = samples[-1].sent
    first_done = next((i for i, s in enumerate(samples) if s.sent >= last), len(samples) - 1)
    return list(samples[: first_done + 1])


def _ceiling(key: str, soak: SoakOptions) -> tuple[float | None, str | None]:
    """A signal's ceiling and source: --limit, else the SLO's p95, the open-file limit, the host's memory."""
    if key in soak.limits:
        return soak.limits[key], "--limit"
    if key == "p95_latency_s" and soak.slo_p95_s is not None:
        return soak.slo_p95_s, "the SLO"
    if key == "open_files" and soak.pid is not None:
        files = open_file_limit(soak.pid)
        return (float(files), "the process's open-file limit") if files else (None, None)
    if key in MEMORY_KEYS:
        total = soak.memory_bytes if soak.memory_bytes is not None else float(psutil.virtual_memory().total)
        return total, "the host's memory"
    return None, None


def open_file_limit(pid: int) -> int | None:
    """The soft limit on the process's open files (RLIMIT_NOFILE), None when unreadable or unlimited."""
    try:
        soft, _ = psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE)
    except (psutil.Error, OSError, AttributeError):
        return None
    return int(soft) if 0 < soft < 2**62 else None


def _steady_rate(samples: Sequence[HealthSample], cut: float) -> float | None:
    steady = [s for s in samples if s.t_s >= cut]
    if len(steady) < 2 or steady[-1].t_s <= steady[0].t_s:
        return None
    return (steady[-1].completed - steady[0].completed) / (steady[-1].t_s - steady[0].t_s)
