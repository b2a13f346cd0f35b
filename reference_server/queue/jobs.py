"""Running one dispatched job: preprocess, call the workload, postprocess, send the results.

Sync workloads run in worker threads (threads.Threads) capped by the shared CapacityLimiter
(max_threads); async ones run on the event loop. Text/number/JSON components are converted inline;
image and audio conversion (file I/O, decoding) and a workload's own per-request `prepare_row` go to
worker threads too, one per event of a batch, concurrently (a batch of 32 images decodes on several
cores, not one after another).
The queue also reads ahead: the waiting events of a batch function's next batch are preprocessed while
the model runs the current one (`read_ahead`).
A batch is one workload call: one exception fails every event of the batch with the same payload; a
bad input fails only its own event.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from reference_server.io.components import (
    FileStore,
    file_bytes,
    file_ref,
    needs_thread,
    postprocess,
    preprocess,
)
from reference_server.io.decode_pool import DecodePool, Failed, decode_image
from reference_server.observe.profiling import BATCH_PHASES, Trace
from reference_server.queue import messages as m
from reference_server.queue.runtime import Event, FunctionRuntime, Job
from reference_server.queue.threads import Threads
from reference_server.workloads.base import SESSION, Component, WorkloadInputError
from reference_server.workloads.models.pixels import Pixels

Emit = Callable[[Event, m.Message], None]
Convert = Callable[[Component, Any, FileStore], Any]
INPUT_ERROR_TITLE = "Invalid input"
_DONE = object()


@dataclass(frozen=True)
class _CallPhases:
    """A workload call's output rows and the phases it reported inside (name -> seconds)."""

    rows: list[list[Any]]
    seconds: dict[str, float]


NOT_READY: Any = object()  # _ready_row: the row needs waiting for


def _decodes_in_pool(fn: FunctionRuntime) -> bool:
    """Image inputs decode in the pool; a function with audio inputs keeps the thread path."""
    types = {c.type for c in fn.workload.inputs}
    return "image" in types and "audio" not in types


def _pil(array: Any) -> Any:
    from PIL import Image

    return Image.fromarray(array)


def _trace(event: Event, phase: str, seconds: float) -> None:
    if event.trace is not None:
        event.trace.add(phase, seconds)


def _check_outputs(fn: FunctionRuntime, values: list[Any]) -> None:
    expected = len(fn.workload.outputs)
    if len(values) != expected:
        kind = fn.workload.kind
        raise RuntimeError(f"workload {kind!r} returned {len(values)} outputs, expected {expected}")


def as_input_error(exc: Exception) -> WorkloadInputError:
    """Preprocessing failures (PIL's decompression-bomb guard, a malformed WAV...) as input errors."""
    if isinstance(exc, WorkloadInputError):
        return exc
    return WorkloadInputError(f"invalid input: {exc.__class__.__name__}: {exc}")


class JobRunner:
    def __init__(self, store: FileStore, limiter: anyio.CapacityLimiter, show_error: bool,
                 emit: Emit) -> None:
        self.store = store
        self.limiter = limiter
        self.threads = Threads(limiter)  # the workload's calls (a batch's hand-off costs no anyio machinery)
        self.prefetch_limiter = anyio.CapacityLimiter(max(1, os.cpu_count() or 1))
        self.show_error = show_error
        self.emit = emit
        self.pool: DecodePool | None = None  # decode processes, set by the lifespan when it starts them
        self._upload_decoded: dict[tuple[int, int], bool] = {}  # _takes_upload_decoded's answers

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.threads.run(fn, *args)

    # ------------------------------------------------------------ conversion
    def _convert(self, convert: Convert, comps: list[Component], values: list[Any]) -> list[Any]:
        return [convert(c, v, self.store) for c, v in zip(comps, values, strict=True)]

    def _prepare(self, fn: FunctionRuntime, data: list[Any], trace: Trace | None) -> list[Any]:
        start = time.perf_counter()
        values = self._convert(preprocess, fn.workload.inputs, data)
        converted = time.perf_counter()
        row = fn.workload.prepare_row(values)
        if trace is not None:
            trace.add("preprocess", converted - start)
            trace.add("prepare", time.perf_counter() - converted)
        return row

    async def _preprocess(self, fn: FunctionRuntime, event: Event) -> list[Any]:
        if needs_thread(fn.workload.inputs) or fn.workload.prepares_rows:
            return list(await self._in_thread(self._prepare, fn, event.data, event.trace))
        return self._prepare(fn, event.data, event.trace)

    async def _row_or_error(self, fn: FunctionRuntime, event: Event,
                            limiter: anyio.CapacityLimiter | None = None) -> Any:
        """The event's input row, or the Exception that rejected it (never raised: it is data here)."""
        try:
            if self.pool is not None and _decodes_in_pool(fn):
                return await self._pooled_row(fn, event, self.pool)
            if limiter is not None and (needs_thread(fn.workload.inputs) or fn.workload.prepares_rows):
                args = (fn, event.data, event.trace)
                return list(await anyio.to_thread.run_sync(self._prepare, *args, limiter=limiter))
            return await self._preprocess(fn, event)
        except Exception as exc:
            return exc

    async def _pooled_row(self, fn: FunctionRuntime, event: Event, pool: DecodePool) -> list[Any]:
        """The input row with its images decoded in a worker process (decode_pool.py); with the
        workload's PixelPrep the decoded array is the prepared row and `prepare_row` is skipped."""
        w = fn.workload
        prep = w.pixel_prep() if len(w.inputs) == 1 else None
        values = []
        for comp, value in zip(w.inputs, event.data, strict=True):
            if comp.type != "image":
                values.append(preprocess(comp, value, self.store))
                continue
            start = time.perf_counter()
            ref = file_ref(value, comp.label)
            decoded = self.store.take_decoded(ref) if prep is not None and prep == pool.upload_prep else None
            if decoded is None:
                raw = self.store.in_memory(ref)
                if raw is None:  # on disk, or a data: URL
                    raw = await anyio.to_thread.run_sync(file_bytes, value, self.store, comp.label)
                decoded = await pool.run(decode_image, raw, comp.label, prep)
            if isinstance(decoded, Failed):
                raise WorkloadInputError(decoded.detail)
            # decoded at upload: the worker's decode time; else the wall time of the trip to a worker
            waited_s = time.perf_counter() - start - decoded.prepare_s
            _trace(event, "preprocess", max(waited_s, decoded.decode_s))
            _trace(event, "prepare", decoded.prepare_s)
            values.append(Pixels(decoded.array) if prep is not None else _pil(decoded.array))
        if prep is not None:
            return values
        if w.prepares_rows:
            start = time.perf_counter()
            row = list(await self._in_thread(w.prepare_row, values))
            _trace(event, "prepare", time.perf_counter() - start)
            return row
        return w.prepare_row(values)

    def _decoded_ahead(self, fn: FunctionRuntime, event: Event) -> list[Any] | None:
        """The input row at once when the event's one input is an image decoded at upload for the
        workload's PixelPrep (the image request of a GPU server): no task, no trip to a worker; None
        when it needs either (then `_pooled_row` does the work). Raises what `_pooled_row` raises."""
        if not self._takes_upload_decoded(fn):
            return None
        w = fn.workload
        start = time.perf_counter()
        decoded = self.store.take_decoded(file_ref(event.data[0], w.inputs[0].label))
        if decoded is None:
            return None
        if isinstance(decoded, Failed):
            raise WorkloadInputError(decoded.detail)
        _trace(event, "preprocess", max(time.perf_counter() - start - decoded.prepare_s, decoded.decode_s))
        _trace(event, "prepare", decoded.prepare_s)
        return [Pixels(decoded.array)]

    def _takes_upload_decoded(self, fn: FunctionRuntime) -> bool:
        """Whether the function's one input is an image the front ends or the pool decode at upload with
        its workload's PixelPrep; kept per function and pool (both fixed while serving; asked per event)."""
        key = (fn.index, id(self.pool))
        known = self._upload_decoded.get(key)
        if known is None:
            pool, w = self.pool, fn.workload
            known = (pool is not None and len(w.inputs) == 1 and w.inputs[0].type == "image"
                     and _decodes_in_pool(fn) and (prep := w.pixel_prep()) is not None
                     and prep == pool.upload_prep)
            self._upload_decoded[key] = known
        return known

    def _ready_row(self, fn: FunctionRuntime, event: Event) -> Any:
        """`_row_or_error`'s answer when it needs no waiting, else NOT_READY."""
        try:
            row = self._decoded_ahead(fn, event)
        except Exception as exc:
            return exc
        return NOT_READY if row is None else row

    def read_ahead(self, fn: FunctionRuntime, events: list[Event]) -> None:
        """Start preprocessing waiting events now, while the model runs the batch ahead of them, so the
        next batch is ready when it is dispatched (the GPU does not wait for decoding). Threads come
        from `prefetch_limiter` (one per core), never from max_threads, so read-ahead cannot delay a
        model call. The result waits on the event; a bad input still fails at its job, as before."""
        if not (needs_thread(fn.workload.inputs) or fn.workload.prepares_rows):
            return
        for event in events:
            if event.prepared is None and event.ready_row is None:
                ready = self._ready_row(fn, event)
                if ready is NOT_READY:
                    row = self._row_or_error(fn, event, self.prefetch_limiter)
                    event.prepared = asyncio.ensure_future(row)
                else:
                    event.ready_row = ready

    async def _preprocess_all(self, fn: FunctionRuntime, events: list[Event]) -> list[Any]:
        """Every event's inputs, converted concurrently (decoding runs on several worker threads at once,
        within max_threads) or read ahead; an event's value is its input row, or the exception that
        rejected it. Rows ready at once (read ahead, or decoded at upload) cost no task."""
        rows: list[Any] = []
        waits: dict[int, Awaitable[Any]] = {}
        for i, event in enumerate(events):
            # The rows leave their events: an event and its job refer to each other, so a finished event
            # is freed by the cycle collector, at its leisure, and its row (an image in a front end's
            # arena, arena.py) must not wait for that.
            if event.ready_row is not None:
                rows.append(event.ready_row)
                event.ready_row = None
                continue
            prepared, event.prepared = event.prepared, None
            if prepared is not None and prepared.done() and not prepared.cancelled():
                rows.append(prepared.result())
                continue
            ready = self._ready_row(fn, event) if prepared is None else NOT_READY
            rows.append(ready)
            if ready is NOT_READY:
                waits[i] = prepared if prepared is not None else self._row_or_error(fn, event)
        if waits:
            for i, row in zip(waits, await asyncio.gather(*waits.values()), strict=True):
                rows[i] = row
        return rows

    async def _postprocess(self, fn: FunctionRuntime, values: list[Any]) -> list[Any]:
        if needs_thread(fn.workload.outputs):
            _check_outputs(fn, values)
            return list(await self._in_thread(self._convert, postprocess, fn.workload.outputs, values))
        return self._postprocess_inline(fn, values)

    def _postprocess_inline(self, fn: FunctionRuntime, values: list[Any]) -> list[Any]:
        _check_outputs(fn, values)
        return self._convert(postprocess, fn.workload.outputs, values)

    def fail(self, events: list[Event], exc: BaseException, first_step: bool = True) -> None:
        """Every event gets a failed process_completed: a user-visible message for input errors, Gradio's
        error payload (show_error) for anything else."""
        if isinstance(exc, WorkloadInputError):
            title: str | None = INPUT_ERROR_TITLE
            output: dict[str, Any] = {"error": str(exc), "duration": 10, "visible": True, "title": title}
        else:
            output, title = m.error_payload(exc, self.show_error)
        for event in events:
            event.outcome = "error"
            self.emit(event, m.failed(event.id, output, title, later_step=not first_step))

    # ------------------------------------------------------------ plain and batched calls
    async def run(self, job: Job) -> bool:
        """Run a non-generator job; True if the workload call succeeded."""
        fn, ready, inputs = job.fn, [], []
        for event, row in zip(job.events, await self._preprocess_all(fn, job.events), strict=True):
            if isinstance(row, Exception):  # a decoding failure is this event's bad input, not a server fault
                self.fail([event], as_input_error(row))
            else:
                inputs.append(row)
                ready.append(event)
        if not ready:
            return False
        if not fn.settings.batch:  # a session-aware workload (session_chat) reads whose call it is
            SESSION.set(ready[0].owner or ready[0].session)
        try:
            call_start = time.perf_counter()
            phases = await self._traced_call(fn, inputs)
            call_s = time.perf_counter() - call_start
            wire = await self._postprocess_rows(fn, ready, phases.rows)
        except Exception as exc:  # the workload's failure is the request's result, not the server's
            self.fail(ready, exc)
            return False
        fn.call_time.add(call_s)
        fn.job_time.add(time.perf_counter() - job.started_at)
        is_generating, mean = (None if fn.settings.batch else False), fn.call_time.mean
        batch_phases = [("fn_call", call_s), *phases.seconds.items()]
        for event, data in zip(ready, wire, strict=True):
            if event.trace is not None:
                for name, seconds in batch_phases:
                    event.trace.add(name, seconds)
            event.outcome = "ok"
            body = m.output_body(data, is_generating, call_s, mean)
            self.emit(event, m.process_completed(event.id, body, True))
        return True

    async def _postprocess_rows(self, fn: FunctionRuntime, events: list[Event], rows: list[list[Any]]
                                ) -> list[list[Any]]:
        """Each event's output row in wire form, its `postprocess` phase traced; converted inline (no
        coroutine per row) when no output needs a thread."""
        inline = not needs_thread(fn.workload.outputs)
        wire = []
        for event, row in zip(events, rows, strict=True):
            post_start = time.perf_counter()
            wire.append(self._postprocess_inline(fn, row) if inline else await self._postprocess(fn, row))
            _trace(event, "postprocess", time.perf_counter() - post_start)
        return wire

    async def _traced_call(self, fn: FunctionRuntime, inputs: list[list[Any]]) -> _CallPhases:
        """One workload call with a fresh BATCH_PHASES dict for the phases it reports (the call's
        thread runs in a copy of this context, so it fills the same dict)."""
        seconds: dict[str, float] = {}
        token = BATCH_PHASES.set(seconds)
        try:
            return _CallPhases(await self._call(fn, inputs), seconds)
        finally:
            BATCH_PHASES.reset(token)

    async def _call(self, fn: FunctionRuntime, inputs: list[list[Any]]) -> list[list[Any]]:
        """One workload call; returns one output row per event."""
        w = fn.workload
        if not fn.settings.batch:
            out = await w.arun(inputs[0]) if w.is_async else await self._in_thread(w.run, inputs[0])
            return [list(out)]
        columns = [list(col) for col in zip(*inputs, strict=True)]
        out_cols = await w.arun_batch(columns) if w.is_async else await self._in_thread(w.run_batch, columns)
        if len(out_cols) != len(w.outputs) or any(len(col) != len(inputs) for col in out_cols):
            raise RuntimeError(f"workload {w.kind!r} returned a misshaped batch for {len(inputs)} events")
        return [list(row) for row in zip(*out_cols, strict=True)]

    # ------------------------------------------------------------ generators
    async def stream(self, job: Job) -> bool:
        """Run a generator job: full first output, then diffs, then the full final value."""
        event, fn = job.events[0], job.fn
        try:
            inputs = await self._preprocess(fn, event)
        except Exception as exc:
            self.fail([event], as_input_error(exc))
            return False
        w = fn.workload
        async_iter = w.astream(inputs) if w.is_async else None
        sync_iter: Iterator[list[Any]] | None = None if w.is_async else w.stream(inputs)
        last: list[Any] | None = None
        try:
            while event.alive:
                step_start = time.perf_counter()
                if async_iter is not None:
                    item: Any = await anext(async_iter, _DONE)
                else:
                    item = await self._in_thread(next, sync_iter, _DONE)
                if item is _DONE:
                    break
                step_s = time.perf_counter() - step_start
                fn.call_time.add(step_s)
                _trace(event, "fn_call", step_s)
                post_start = time.perf_counter()
                wire = await self._postprocess(fn, list(item))
                _trace(event, "postprocess", time.perf_counter() - post_start)
                self._send_step(event, last, wire, step_s, fn)
                if event.trace is not None:
                    event.trace.n_iterations += 1
                last = wire
        except Exception as exc:
            self.fail([event], exc, first_step=last is None)
            return False
        finally:
            if async_iter is not None:
                await async_iter.aclose()  # type: ignore[attr-defined]
            elif sync_iter is not None and hasattr(sync_iter, "close"):
                sync_iter.close()
        if not event.alive:
            return False
        fn.job_time.add(time.perf_counter() - job.started_at)
        final = last if last is not None else [None] * len(w.outputs)
        body = m.output_body(final, False, time.perf_counter() - step_start, fn.call_time.mean)
        event.outcome = "ok"
        self.emit(event, m.process_completed(event.id, body, True))
        return True

    def _send_step(self, event: Event, last: list[Any] | None, wire: list[Any], step_s: float,
                   fn: FunctionRuntime) -> None:
        if last is None or event.simple_format:
            data = wire
        else:
            diff_start = time.perf_counter()
            data = [m.diff(old, new) for old, new in zip(last, wire, strict=True)]
            _trace(event, "streaming_diff", time.perf_counter() - diff_start)
        body = m.output_body(data, True, step_s, fn.call_time.mean)
        self.emit(event, m.process_generating(event.id, body))
