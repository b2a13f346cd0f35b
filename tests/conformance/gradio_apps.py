"""A small real Gradio app declaring the same functions as a reference-server config.

`SUITE` is the one declaration of the test functions; `gradio_server(...)` serves it with real
Gradio (6.x) in a subprocess on a free 127.0.0.1 port, and `reference_functions` (in
`reference.py`) turns the same declaration into the reference server's config. Keeping one list is
what makes the differential tests meaningful.

The module is also the subprocess's entry point (`python gradio_apps.py '<json>'`), so it imports
nothing from the test package and imports gradio only inside the child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from qbench.tune.servers.server_process import free_port

if TYPE_CHECKING:
    from tests.startup import AppProcess

Kind = Literal["echo", "sleep", "stream", "fail", "gr_error"]


@dataclass(frozen=True)
class FnSpec:
    """One event listener, as both servers declare it."""

    api_name: str
    kind: Kind
    sleep_s: float = 0.0  # sleep, fail: per call; stream: between chunks (the first comes at once)
    chunks: int = 0  # stream: number of yields
    concurrency_limit: int | None | Literal["default"] = "default"
    concurrency_id: str | None = None
    batch: bool = False
    max_batch_size: int = 4


@dataclass(frozen=True)
class QueueSpec:
    """queue() and launch() knobs."""

    max_size: int | None = None
    max_threads: int = 40
    default_concurrency_limit: int | None = 1
    status_update_rate: float | Literal["auto"] = "auto"


SLEEP_S = 0.2
SHARED_SLEEP_S = 0.5  # the `shared` group's functions
SUITE: tuple[FnSpec, ...] = (
    FnSpec("echo", "echo"),
    FnSpec("sleep_1", "sleep", sleep_s=SLEEP_S, concurrency_limit=1),
    FnSpec("sleep_n", "sleep", sleep_s=SLEEP_S, concurrency_limit=3),
    # 0.5 s: a busy box's client reads a start late, and its server dispatches late, by a tenth of a second
    FnSpec("shared_a", "sleep", sleep_s=SHARED_SLEEP_S, concurrency_limit=2, concurrency_id="shared"),
    FnSpec("shared_b", "sleep", sleep_s=SHARED_SLEEP_S, concurrency_limit=1, concurrency_id="shared"),
    # 0.5 s a batch: a burst's joins land inside the first batch's run, and its start is seen
    # running, even on a busy box
    FnSpec("batch", "sleep", sleep_s=0.5, concurrency_limit=1, batch=True, max_batch_size=4),
    FnSpec("stream", "stream", sleep_s=0.02, chunks=4),
    FnSpec("stream_long", "stream", sleep_s=0.1, chunks=10),  # ~0.9 s; used by the disconnect test
    FnSpec("fail", "fail"),
    FnSpec("batch_fail", "fail", sleep_s=SLEEP_S, concurrency_limit=1, batch=True, max_batch_size=4),
    FnSpec("mixed_plain", "sleep", sleep_s=SLEEP_S, concurrency_limit=1, concurrency_id="mixed"),
    FnSpec("mixed_batch", "sleep", sleep_s=SLEEP_S, concurrency_id="mixed", batch=True, max_batch_size=4),
    FnSpec("gr_error", "gr_error"),  # raises gr.Error(ERROR_MESSAGE, title=ERROR_TITLE, duration=5)
    FnSpec("hold", "sleep", sleep_s=0.5, concurrency_limit=1),  # keeps its group busy (cancel, disconnect)
    FnSpec("eta", "sleep", sleep_s=SLEEP_S, concurrency_limit=1),  # used only by the ETA test
    # a full queue's window is their 1 s (max_size_503, the client's QueueError): wide enough that a busy
    # box's joins land in it
    FnSpec("long_a", "sleep", sleep_s=1.0, concurrency_limit=1),
    FnSpec("long_b", "sleep", sleep_s=1.0, concurrency_limit=1),
    # holds the "mixed" group 1 s: the events behind it have all joined before it ends, on any box
    FnSpec("mixed_hold", "sleep", sleep_s=1.0, concurrency_limit=1, concurrency_id="mixed"),
    # limit 3 for 1 s: each job is seen running (its start read 0.5 s or more before its end) on a box
    # whose client reads a stream late by up to a second (limit_n_runs_n; at 0.2 s, three tries of a burst
    # on a box with six test workers beside four busy loops never landed)
    FnSpec("sleep_n_long", "sleep", sleep_s=1.0, concurrency_limit=3),
)
ERROR_MESSAGE, ERROR_TITLE, ERROR_DURATION = "synthetic failure", "Oops", 5.0
TIGHT_QUEUE = QueueSpec(max_size=3, max_threads=2)  # the second app: global caps
PERIODIC_QUEUE = QueueSpec(status_update_rate=0.15)  # estimations on a timer, not at dispatch


# ---------------------------------------------------------------- the functions (run in the child)


def stream_chunk(text: str, i: int) -> str:
    """The i-th value a stream function yields: "<text>", "<text> 1", "<text> 1 2", ..."""
    return text + "".join(f" {k}" for k in range(1, i + 1))


def make_fn(spec: FnSpec) -> Any:
    """A fresh function object per spec (Gradio's default concurrency_id is the object's id)."""
    import asyncio

    if spec.kind == "echo":
        return lambda text: text
    if spec.kind == "fail":

        async def fail(text: Any) -> str:  # a batch function gets a list; it fails all the same
            await asyncio.sleep(spec.sleep_s)
            raise ValueError(f"synthetic failure for {text!r}")

        return fail
    if spec.kind == "gr_error":
        import gradio as gr

        def gr_error(text: str) -> str:
            raise gr.Error(ERROR_MESSAGE, title=ERROR_TITLE, duration=ERROR_DURATION, print_exception=False)

        return gr_error
    if spec.kind == "stream":

        async def stream(text: str) -> Any:
            for i in range(spec.chunks):
                if i:
                    await asyncio.sleep(spec.sleep_s)
                yield stream_chunk(text, i)

        return stream
    if spec.batch:

        async def sleep_batch(text: list[str]) -> list[list[str]]:  # /info names the parameter "text"
            await asyncio.sleep(spec.sleep_s)
            return [list(text)]

        return sleep_batch

    async def sleep(text: str) -> str:
        await asyncio.sleep(spec.sleep_s)
        return text

    return sleep


def build_demo(specs: list[FnSpec], queue: QueueSpec) -> Any:
    import gradio as gr

    with gr.Blocks() as demo:
        text_in, text_out = gr.Textbox(), gr.Textbox()
        for spec in specs:
            gr.Button(spec.api_name).click(
                make_fn(spec),
                text_in,
                text_out,
                api_name=spec.api_name,
                concurrency_limit=spec.concurrency_limit,
                concurrency_id=spec.concurrency_id,
                batch=spec.batch,
                max_batch_size=spec.max_batch_size,
            )
    demo.queue(
        max_size=queue.max_size,
        default_concurrency_limit=queue.default_concurrency_limit,
        status_update_rate=queue.status_update_rate,
    )
    return demo




def child_main(payload: str) -> None:
    """Subprocess entry: launch, print READY <url>, serve until stdin closes."""
    spec = json.loads(payload)
    demo = build_demo([FnSpec(**f) for f in spec["functions"]], QueueSpec(**spec["queue"]))
    for attempt in range(5):
        port = free_port()
        try:
            demo.launch(
                server_name="127.0.0.1",
                server_port=port,
                prevent_thread_lock=True,
                quiet=True,
                max_threads=spec["queue"]["max_threads"],
                show_error=False,
            )
            break
        except OSError:  # another engineer took the port between probe and bind
            if attempt == 4:
                raise
    print(f"READY http://127.0.0.1:{port}", flush=True)
    sys.stdin.read()
    demo.close()


# ---------------------------------------------------------------- the parent side


def child_env() -> dict[str, str]:
    from tests.startup import with_startup  # the parent's: this file also runs as the app

    env = dict(os.environ)
    env.update(GRADIO_ANALYTICS_ENABLED="False", GRADIO_SHARE="False")
    return with_startup(env)  # as an app under the hook starts (tests/startup.py)


@contextmanager
def gradio_servers(
    queues: tuple[QueueSpec, ...], specs: tuple[FnSpec, ...] = SUITE, startup_s: float = 120.0
) -> Iterator[list[str]]:
    """Serve `specs` once per queue config, each in its own subprocess started in parallel.

    Yields the base URLs in `queues` order; always stops every child.
    """
    from tests.startup import start_app  # forked from the preloaded interpreter where it can be

    with ExitStack() as stack:
        children = []
        for queue in queues:
            log = stack.enter_context(tempfile.TemporaryFile())
            payload = json.dumps({"functions": [asdict(s) for s in specs], "queue": asdict(queue)})
            proc = start_app([sys.executable, __file__, payload], env=child_env(), stderr=log.fileno())
            stack.callback(_stop, proc)
            children.append((proc, log))
        yield [_wait_ready(proc, log, startup_s) for proc, log in children]


@contextmanager
def gradio_server(queue: QueueSpec = QueueSpec(), specs: tuple[FnSpec, ...] = SUITE) -> Iterator[str]:
    """One real Gradio app serving `specs`; yields its base URL."""
    with gradio_servers((queue,), specs) as urls:
        yield urls[0]


def _wait_ready(proc: AppProcess, log: Any, startup_s: float) -> str:
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(startup_s)
    if not lines or not lines[0].startswith("READY "):
        log.seek(0)
        raise RuntimeError(f"gradio app did not start in {startup_s}s:\n{log.read().decode()[-3000:]}")
    return lines[0].split()[1]


def _stop(proc: AppProcess) -> None:
    try:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    child_main(sys.argv[1])
