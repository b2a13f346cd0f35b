"""Gradio 3.50's queue (`gradio: 3`): its estimations, the data gathering at dispatch, its messages.

Checked against gradio 3.50.2's `gradio/queueing.py` and a trace of the real server
(`python -m tests.gradio_versions.trace 3.50.2`):

* one FIFO for every event and `concurrency_count` workers (EventQueue puts every function in one
  group with that limit); a batch function's job takes the head event plus up to max_batch_size - 1
  later events of the same function;
* a dispatched job first asks each of its events for its data (`send_data`, 60 s to answer), then
  sends `process_starts`; an event whose client is gone is dropped from the job;
* estimations, on join and after every dispatch (`status_update_rate: auto`) or on a timer:

      avg_event_process_time            = mean whole-job duration of the successful jobs (0 before one)
      avg_event_concurrent_process_time = avg / min(concurrency_count, jobs measured)  (null before one)
      rank_eta  = rank x concurrent + avg (+ concurrent when every worker is busy)     (null before one)
      queue_eta = concurrent x waiting events at the last completed job (1 before one)

* messages have no event_id: process_starts is bare, outputs are {data, is_generating, duration,
  average_duration} with full values on every generator step (no diffs), a generator's
  process_completed repeats its last step, a failure's output is {"error": message or null}.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from reference_server.queue import messages as m
from reference_server.queue.runtime import Event, Group, Job
from reference_server.workloads.base import WorkloadInputError

VERSION = "3.50.2"
DATA_TIMEOUT_S = 60.0  # Gradio 3.x's receive_timeout for the event's data
OUTPUT_KEYS = ("data", "is_generating", "duration", "average_duration")

Emit = Callable[[Event, m.Message], None]


class Failer(Protocol):
    def fail(self, events: list[Event], exc: BaseException, first_step: bool = True) -> None: ...


@dataclass
class Stats:
    """Gradio 3.x's queue-wide averages behind every estimation (module docstring)."""

    total_s: float = 0.0
    count: int = 0
    avg_s: float = 0.0
    concurrent_s: float | None = None
    queue_eta_s: float = 1.0

    def update(self, duration_s: float, concurrency_count: int, waiting: int) -> None:
        self.total_s += duration_s
        self.count += 1
        self.avg_s = self.total_s / self.count
        self.concurrent_s = self.avg_s / min(concurrency_count, self.count)
        self.queue_eta_s = self.concurrent_s * waiting

    def estimation(self, rank: int | None, queue_size: int, group: Group | None) -> m.Message:
        """The `estimation` message for the event at `rank` (None: /queue/status)."""
        rank_eta = None
        if rank is not None and self.concurrent_s is not None:
            rank_eta = rank * self.concurrent_s + self.avg_s
            if group is not None and not group.has_capacity:
                rank_eta += self.concurrent_s
        return {"msg": "estimation", "rank": rank, "queue_size": queue_size,
                "avg_event_process_time": self.avg_s, "avg_event_concurrent_process_time": self.concurrent_s,
                "rank_eta": rank_eta, "queue_eta": self.queue_eta_s}


def send_data() -> m.Message:
    return {"msg": "send_data", "event_id": None}


async def gather(job: Job, emit: Emit, runner: Failer) -> bool:
    """Ask every event of the job for its data, then send process_starts to those that answered.

    An event whose client is gone or silent is dropped from the job (no longer alive); one whose data
    does not fit is failed as an input error. False when no event is left to run.
    """
    waiting = [e for e in job.events if e.alive and e.data_waiter is not None and not e.data_waiter.done()]
    for event in waiting:
        emit(event, send_data())
    if waiting:
        await asyncio.wait([e.data_waiter for e in waiting if e.data_waiter], timeout=DATA_TIMEOUT_S)
    ready = []
    for event in job.events:
        if not event.alive:
            continue
        problem = _take_data(event)
        if problem is None:
            ready.append(event)
            continue
        if problem:
            runner.fail([event], WorkloadInputError(problem))
        else:
            emit(event, {"msg": "process_completed", "event_id": event.id,
                         "output": {"error": "Time out uploading data to server"}, "success": False})
        event.alive = False  # the job runs without it (its data stays empty: the runner skips it)
    for event in ready:
        emit(event, {"msg": "process_starts", "event_id": event.id, "eta": None})
    return bool(ready)


def _take_data(event: Event) -> str | None:
    """None when the event's data is in place; else why not ("" for no answer)."""
    waiter = event.data_waiter
    if waiter is None:
        return None
    if not waiter.done() or waiter.cancelled():
        return ""
    data = waiter.result()
    expected = len(event.fn.workload.inputs)
    if not isinstance(data, list) or len(data) != expected:
        return f"function {event.fn.name!r} takes {expected} input(s) as a list in 'data', got {data!r:.80}"
    event.data = data
    return None


def message(msg: m.Message, generator: bool, last: dict[str, Any] | None) -> m.Message | None:
    """An internal (6.x-shaped) message as Gradio 3.x sends it; None for messages 3.x does not send."""
    kind = msg["msg"]
    if kind == "estimation" and "avg_event_process_time" in msg:
        return msg
    if kind in ("send_data", "process_starts"):
        return {"msg": kind}
    if kind == "process_generating":
        return {"msg": kind, "output": _output(msg["output"]), "success": True}
    if kind != "process_completed":
        return None
    output = msg.get("output") or {}
    if not msg.get("success"):
        return {"msg": kind, "output": {"error": output.get("error")}, "success": False}
    if generator and last is not None:  # 3.x completes a generator with its last step, as it was sent
        return {"msg": kind, "output": last, "success": True}
    return {"msg": kind, "output": _output(output), "success": True}


def _output(output: dict[str, Any]) -> dict[str, Any]:
    return {key: output.get(key) for key in OUTPUT_KEYS}


# Gradio 4.44 (`gradio: 4`) speaks sse_v3 like 6.x; its config and messages lack later fields.
_LATER_CONFIG_KEYS = ("api_prefix", "mcp_server", "page", "pages", "pwa")
_LATER_DEPENDENCY_KEYS = ("api_description", "api_visibility", "component_prop_inputs", "connection",
                          "event_specific_args", "js_implementation", "render_id", "show_progress_on",
                          "stream_every", "time_limit", "trigger_only_on_failure")


def config4(config: dict[str, Any]) -> dict[str, Any]:
    """A 6.x-shaped /config as Gradio 4.44 writes it (no api_prefix: its routes sit at the root)."""
    out = {k: v for k, v in config.items() if k not in _LATER_CONFIG_KEYS}
    out.update(show_api=True, theme_hash=None, username=None)
    out["dependencies"] = [
        {**{k: v for k, v in dep.items() if k not in _LATER_DEPENDENCY_KEYS},
         "show_api": dep.get("api_visibility") == "public", "zerogpu": False}
        for dep in config["dependencies"]
    ]
    return out


_FIELDS_4 = {"process_completed": ("msg", "event_id", "output", "success"),
             "process_generating": ("msg", "event_id", "output", "success")}


def message4(msg: m.Message) -> m.Message:
    """A 6.x-shaped message as Gradio 4.44 sends it: no title, used_cache, cache_duration, avg_time or
    time_limit (checked against 4.44.1 by tests/gradio_versions/test_differential.py)."""
    keep = _FIELDS_4.get(msg["msg"])
    if keep is None:
        return msg
    out = {key: msg[key] for key in keep if key in msg}
    output = out.get("output")
    if isinstance(output, dict) and "used_cache" in output:
        out["output"] = {k: v for k, v in output.items() if k != "used_cache"}
    return out


def dependency(name: str, inputs: list[int], outputs: list[int], queue: bool, batch: bool,
               max_batch_size: int, generator: bool) -> dict[str, Any]:
    """One entry of 3.x's config["dependencies"] (no `id`: the fn_index is the position)."""
    return {
        "targets": [], "inputs": inputs, "outputs": outputs, "backend_fn": True,
        "js": None, "queue": queue, "api_name": name, "scroll_to_output": False, "show_progress": "full",
        "every": None, "batch": batch, "max_batch_size": max_batch_size, "cancels": [],
        "types": {"continuous": False, "generator": generator}, "collects_event_data": False,
        "trigger_after": None, "trigger_only_on_success": False,
    }


def config(title: str, show_error: bool, components: list[dict[str, Any]],
           dependencies: list[dict[str, Any]]) -> dict[str, Any]:
    """The /config body of a 3.50 app (no `protocol`: clients then speak ws; no `api_prefix`)."""
    return {
        "version": VERSION, "mode": "blocks", "app_id": 0, "dev_mode": False, "analytics_enabled": False,
        "components": components, "css": None, "title": title, "space_id": None, "enable_queue": True,
        "show_error": show_error, "show_api": True, "is_colab": False, "stylesheets": [], "theme": "default",
        "layout": {"id": 0, "children": [{"id": c["id"]} for c in components]},
        "dependencies": dependencies,
    }
