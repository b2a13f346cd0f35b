"""The server's health during a soak run: `HealthSampler`, a thread sampling the server's process tree,
/status, file cache and qbench itself into `health.jsonl`; `StuckWatch`, the stop hook's stuck-queue test."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import orjson
import psutil

from qbench.run import control
from qbench.run.json_values import Readable, json_int
from qbench.run.load.generator import LiveStats

STATUS_TIMEOUT_S = 2.0  # a /status read at most (and at most one interval)
QUIET_S = 10.0  # the sampler ends on its own this long after the run stopped calling
#: the cache folder is walked again no sooner than this many times its last walk took: an app's cache
#: holds thousands of files (this box's /tmp/gradio, 9,000 files, 0.1 s of CPU a walk when quiet), and
#: walking it at every 0.25 s sample of a soak beside busy loops left 8 samples of 64 due; cheap walks
#: still go every sample
CACHE_WALK_SHARE = 10.0
STUCK_PREFIX = "stuck queue"  # how a stuck-queue stop's reason begins (read back by qbench.run.soak.command)
FAILING_PREFIX = "every request failing"  # ...and that of a server so far behind that all requests fail


@dataclass
class HealthSample(Readable):
    """One look at the server and the run. None: not measured (no pid, no /status, no cache folder)."""

    t_s: float  # seconds since the sampler started (the start of the run, give or take discovery)
    at: float  # wall-clock time (time.time())
    sent: int  # requests sent so far
    completed: int  # requests finished so far, any outcome (the x of per-request trends)
    ok: int  # of which ok
    in_flight: int  # sent, not finished
    live: bool = True  # the run was still going: its stop hook ran after this sample; False: after the run
    rss_bytes: int | None = None  # the server's process tree, summed (psutil)
    open_files: int | None = None  # file descriptors of the tree (Linux), else open files
    threads: int | None = None  # threads of the tree
    children: int | None = None  # processes under the server's
    status_rss_bytes: int | None = None  # the reference server's own RSS (/status)
    status_waiting: int | None = None  # events waiting in its queue (/status)
    status_leaked_bytes: int | None = None  # its deliberate leak so far (/status; queue.leak_bytes_per_event)
    cache_bytes: int | None = None  # bytes under the app's file cache (None: between walks)
    qbench_rss_bytes: int | None = None  # qbench's own process
    qbench_open_files: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_health(path: Path) -> list[HealthSample]:
    """A run folder's `health.jsonl` (an absent file: no samples; a cut last line is skipped)."""
    if not path.exists():
        return []
    samples = []
    for line in path.read_bytes().splitlines():
        try:
            samples.append(HealthSample.from_dict(orjson.loads(line)))
        except ValueError:  # orjson's, or pydantic's: not a sample
            continue
    return samples


def tree_usage(pid: int) -> dict[str, int] | None:
    """RSS, open files, threads and children summed over `pid` and its descendants; None when gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    usage = {"rss_bytes": 0, "open_files": 0, "threads": 0, "children": len(procs) - 1}
    for proc in procs:
        try:
            with proc.oneshot():
                usage["rss_bytes"] += proc.memory_info().rss
                usage["threads"] += proc.num_threads()
                usage["open_files"] += _files(proc)
        except psutil.Error:
            continue  # a child that exited between the listing and the reading
    return usage


def _files(proc: psutil.Process) -> int:
    return proc.num_fds() if hasattr(proc, "num_fds") else len(proc.open_files())


def folder_bytes(folder: Path) -> int | None:
    """Bytes of the files under `folder` (None when it does not exist)."""
    if not folder.is_dir():
        return None
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def default_cache_folder() -> Path | None:
    """The app's file cache: `GRADIO_TEMP_DIR`, else Gradio's default (<tmp>/gradio) where it exists."""
    import tempfile

    named = os.environ.get("GRADIO_TEMP_DIR")
    folder = Path(named) if named else Path(tempfile.gettempdir()) / "gradio"
    return folder if named or folder.is_dir() else None


class HealthSampler:
    """Samples every `interval_s` into `path` (one JSON line each, flushed) and `samples`."""

    def __init__(self, path: Path, *, interval_s: float = 5.0, pid: int | None = None,
                 status_url: str | None = None, cache_folder: Path | None = None,
                 status_reader: Callable[[str], dict[str, Any] | None] | None = None) -> None:
        self.path, self.interval_s, self.pid = path, interval_s, pid
        self.status_url, self.cache_folder = status_url, cache_folder
        self.read_status = status_reader or self._read_status_briefly
        self.samples: list[HealthSample] = []
        self._stats = LiveStats()
        self._updated = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.perf_counter()
        self._status_answered, self._status_misses = False, 0  # a Gradio app has none: asked 3 times
        self._cache_due = 0.0  # when the cache folder may be walked again (CACHE_WALK_SHARE)
        self._self = psutil.Process()
        self._http: httpx.Client | None = None  # /status: one client for the sampler's life

    def update(self, stats: LiveStats) -> None:
        """The run's latest progress (the stop hook calls this on every tick)."""
        self._stats, self._updated = stats, time.perf_counter()

    def start(self) -> HealthSampler:
        self._started = time.perf_counter()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="qbench-health")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (a run's finishing work after its load is marked `live: false` until then)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        """Sample every `interval_s` (its cost not added, no catching up); each written one interval late."""
        with self.path.open("ab") as out, contextlib.ExitStack() as stack:
            stack.callback(self._close)
            pending: tuple[HealthSample, float] | None = None
            due = time.perf_counter()
            while True:
                sample = (self.sample(), time.perf_counter())
                if pending is not None:
                    self._write(out, *pending)
                pending = sample
                due = max(due + self.interval_s, time.perf_counter())
                stopped = self._stop.wait(due - time.perf_counter())
                if stopped or time.perf_counter() - self._updated > QUIET_S:
                    self._write(out, *pending)
                    return

    def _write(self, out: BinaryIO, sample: HealthSample, taken: float) -> None:
        sample.live = self._updated > taken
        self.samples.append(sample)
        out.write(orjson.dumps(sample.to_dict()) + b"\n")
        out.flush()

    def sample(self) -> HealthSample:
        stats = self._stats
        sample = HealthSample(t_s=time.perf_counter() - self._started, at=time.time(), sent=stats.sent,
                              completed=stats.completed, ok=stats.ok, in_flight=stats.in_flight)
        usage = tree_usage(self.pid) if self.pid is not None else None
        if usage is not None:
            sample.rss_bytes, sample.open_files = usage["rss_bytes"], usage["open_files"]
            sample.threads, sample.children = usage["threads"], usage["children"]
        self._read_status(sample)
        if self.cache_folder is not None and time.perf_counter() >= self._cache_due:
            began = time.perf_counter()
            sample.cache_bytes = folder_bytes(self.cache_folder)
            self._cache_due = began + CACHE_WALK_SHARE * (time.perf_counter() - began)
        try:
            sample.qbench_rss_bytes = self._self.memory_info().rss
            sample.qbench_open_files = _files(self._self)
        except psutil.Error:
            pass
        return sample

    def _read_status_briefly(self, url: str) -> dict[str, Any] | None:
        """/status, given at most the sampling interval (None: skip that sample's figures)."""
        timeout_s = min(max(self.interval_s, 0.5), STATUS_TIMEOUT_S)
        if self._http is None:
            self._http = control.client(timeout_s)
        return control.read_status(url, timeout_s=timeout_s, http=self._http)

    def _close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _read_status(self, sample: HealthSample) -> None:
        if self.status_url is None or (not self._status_answered and self._status_misses >= 3):
            return
        status = self.read_status(self.status_url)
        if status is None:
            self._status_misses += 1
            return
        self._status_answered = True
        sample.status_rss_bytes = json_int(status.get("rss_bytes"))
        sample.status_waiting = json_int(status.get("events_waiting"))
        sample.status_leaked_bytes = json_int(status.get("leaked_bytes"))


class StuckWatch:
    """Requests go out and none completes ok for `after_s` s: a stuck queue, or every request failing."""

    def __init__(self, after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.after_s, self.clock = after_s, clock
        self._ok = -1
        self._since = clock()
        self._sent_then = self._completed_then = 0

    def check(self, stats: LiveStats) -> str | None:
        """The stop reason once stuck, else None."""
        now = self.clock()
        if stats.ok != self._ok:
            self._ok, self._since = stats.ok, now
            self._sent_then, self._completed_then = stats.sent, stats.completed
            return None
        waited = now - self._since
        sent, failed = stats.sent - self._sent_then, stats.completed - self._completed_then
        if waited < self.after_s or sent <= 0 or stats.in_flight + failed <= 0:
            return None
        if failed:
            errors = ", ".join(f"{n:,} {kind}" for kind, n in sorted(stats.errors_by_kind.items()))
            return (f"{FAILING_PREFIX}: {sent:,} requests sent in the last {waited:.0f} s, none completed "
                    f"ok, {failed:,} failed (errors so far: {errors}): the server is far behind its load")
        return (f"{STUCK_PREFIX}: {sent:,} requests sent in the last {waited:.0f} s and none completed "
                f"({stats.in_flight:,} in flight, {stats.ok:,} completed before)")
