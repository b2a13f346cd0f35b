"""The core's own CPU per image prediction behind front ends, in one process, without sockets.

bench/server_cost.py measures the whole server under qbench's load on the same cores, so on a shared
2-core box its figures move 20-30% between runs. This one isolates what the core's Python does per
prediction: the `image-ideal` stand-in's app (decode workers on, as with front ends) and its
`front_ends.CoreLink`, driven by a fake front end over in-memory links (each side's loop-turn
messages encoded and decoded as on the Unix socket). Closed-loop users each send an upload (parsed
and decoded, as a front end sends it), a join and a stream (`/queue/data`) until the stream ends.

    core ms   CPU of the process per prediction (every thread), less the fake front end's own CPU

Not counted: the socket syscalls and the kernel's share (about a third of the core's CPU in a real
server by `perf`), qbench, the front end's HTTP. Compare trees with `--trees A,B` (each run in its own
process with that tree first on PYTHONPATH, alternated, medians of `--repeats`):

    .venv/bin/python bench/core_cost.py                                  # this checkout, 3 x 4,000
    .venv/bin/python bench/core_cost.py --trees /tmp/old,. --repeats 5   # an old checkout against this one
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FUNCTION = {"api_name": "classify", "workload": "image-ideal", "params": {"batch_ms": 5}, "batch": True,
            "max_batch_size": 32, "concurrency_limit": 1}


class _Transport:
    """A link's transport whose writes reach the other side in a later loop turn, as a socket's do."""

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self.deliver = deliver
        self.loop = asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        self.loop.call_soon(self.deliver, data)

    def is_closing(self) -> bool:
        return False


async def measure(users: int, predictions: int) -> dict[str, float]:
    """One closed-loop run in this process: core CPU ms per prediction, served/s, mean batch size."""
    import numpy as np
    import orjson

    from reference_server.http import front_ends
    from reference_server.http.app import build_app
    from reference_server.http.front_ends import CoreLink, Link
    from reference_server.io.decode_pool import Decoded, UploadPart
    from reference_server.settings import ServerSettings

    settings = {"functions": [FUNCTION], "device": "cpu", "launch": {"decode_workers": 1, "max_threads": 40}}
    app = build_app(ServerSettings.model_validate(settings))
    image = np.random.default_rng(1).integers(0, 255, (224, 224, 3), np.uint8)
    wire = getattr(front_ends, "request_wire", None)  # how a front end sends a request (a dict before)
    async with app.router.lifespan_context(app):
        core = CoreLink(app, ("127.0.0.1", 80), lambda _core: None)
        fake_cpu = [0.0]  # the fake front end's own CPU, taken out of the process's

        def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
            def run(*args: Any) -> Any:
                start = time.thread_time()
                try:
                    return fn(*args)
                finally:
                    fake_cpu[0] += time.thread_time() - start
            return run

        users_by_rid: dict[int, _User] = {}
        finished = asyncio.Event()
        done = [0]
        rids = iter(range(1, 1 << 62))

        def on_frame(frame: tuple[Any, ...]) -> None:
            if frame[0] == "hello":
                return
            user = users_by_rid.pop(frame[1]) if _last(frame) else users_by_rid[frame[1]]
            user.on(frame)

        front = Link(on_frame, lambda: None)
        front._flush = timed(front._flush)  # type: ignore[method-assign]
        front.connection_made(_Transport(core.link.data_received))  # type: ignore[arg-type]
        core.link.connection_made(_Transport(timed(front.data_received)))  # type: ignore[arg-type]

        class _User:
            def __init__(self, index: int) -> None:
                self.session, self.step, self.stream = f"user-{index}", "", b""
                self.upload()

            def send(self, method: str, path: str, body: bytes = b"", query: bytes = b"", parsed: Any = None,
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
                rid = next(rids)
                users_by_rid[rid] = self
                request = {"method": method, "path": path, "raw_path": path.encode(), "query_string": query,
                           "headers": [(b"content-type", b"application/json"), *headers],
                           "http_version": "1.1", "client": ("127.0.0.1", 1)}
                front.send(("r", rid, request if wire is None else wire(request), body, parsed))

            def upload(self) -> None:
                self.step = "upload"
                decoded = Decoded(image.copy(), 0.001, 0.0)  # as a front end decodes it
                part = UploadPart("files", "image.jpg", b"\xff\xd8" + bytes(12_000), decoded)
                self.send("POST", "/gradio_api/upload", parsed=[part],
                          headers=((b"content-length", b"12300"), (b"session_hash", self.session.encode())))

            def on(self, frame: tuple[Any, ...]) -> None:
                body = frame[3] if frame[0] == "j" else frame[2] if frame[0] == "b" else None
                if body is None:
                    return
                if self.step == "upload":
                    self.step = "join"
                    data = [{"path": orjson.loads(body)[0], "meta": {"_type": "gradio.FileData"}}]
                    join = {"data": data, "fn_index": 0, "session_hash": self.session}
                    self.send("POST", "/gradio_api/queue/join", orjson.dumps(join))
                elif self.step == "join":
                    self.step, self.stream = "stream", b""
                    self.send("GET", "/gradio_api/queue/data", query=b"session_hash=" + self.session.encode())
                else:
                    self.stream += body
                    if _last(frame):
                        if b'"msg":"process_completed"' not in self.stream or b'"success":true' not in (
                                self.stream):
                            raise SystemExit(f"error: a prediction failed: {self.stream[-300:]!r}")
                        done[0] += 1
                        if done[0] >= predictions:
                            finished.set()
                        else:
                            self.upload()

        start, cpu = time.perf_counter(), time.process_time()
        for index in range(users):
            timed(_User)(index)
        await finished.wait()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu - fake_cpu[0]
        batch = app.state.server.queue.traces.summary().get("mean_batch_size")
    return {"core_ms": 1000 * cpu / predictions, "served_per_s": predictions / wall,
            "fake_front_end_ms": 1000 * fake_cpu[0] / predictions, "mean_batch": float(batch or 0)}


def _last(frame: tuple[Any, ...]) -> bool:
    """The frame ends its response (a whole answer, or a body with no more to come)."""
    return frame[0] == "j" or (frame[0] == "b" and not frame[3])


def run_tree(tree: Path, users: int, predictions: int) -> dict[str, float]:
    """One measurement in a fresh process with `tree` first on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH"))
                                                      if p)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", f"{users},{predictions}"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"error: the run in {tree} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trees", default=".", help="comma list of checkouts to compare (default: this one)")
    p.add_argument("--users", type=int, default=16, help="closed-loop users (default 16)")
    p.add_argument("--predictions", type=int, default=4000, help="per run (default 4,000)")
    p.add_argument("--repeats", type=int, default=3, help="runs per tree, alternated (default 3)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        import uvloop

        users, predictions = (int(v) for v in args.one.split(","))
        print(json.dumps(uvloop.run(measure(users, predictions))))
        return 0
    trees = [(ROOT / t).resolve() if not Path(t).is_absolute() else Path(t) for t in args.trees.split(",")]
    runs: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(args.repeats):
        for tree in trees:
            runs[tree].append(run_tree(tree, args.users, args.predictions))
    print(f"image-ideal core behind one fake front end, {args.users} users, {args.predictions} predictions "
          f"per run, medians of {args.repeats}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'tree':40} {'core ms':>8} {'served/s':>9} {'batch':>6}  core ms of each run")
    for tree, samples in runs.items():
        core = [s["core_ms"] for s in samples]
        each = " ".join(f"{c:.3f}" for c in core)
        print(f"{str(tree)[-40:]:40} {statistics.median(core):8.3f} "
              f"{statistics.median(s['served_per_s'] for s in samples):9.0f} "
              f"{statistics.median(s['mean_batch'] for s in samples):6.1f}  {each}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
