"""Gradio's queue knobs per release: which exist where, their equivalents, and the code to paste.

    knob                        3.x                          4.x, 5.x, 6.x
    concurrency_count           demo.queue(concurrency_count) -  (equivalent: default_concurrency_limit)
    concurrency_limit           -  (equivalent: concurrency_count)   event listener
    default_concurrency_limit   -  (equivalent: concurrency_count)   demo.queue(...)
    concurrency_id              -  (no equivalent)           event listener
    max_batch_size              event listener, with batch=True (every release)
    max_threads                 demo.launch(max_threads) (every release; 3.x raises it to concurrency_count)
    max_size                    demo.queue(max_size) (every release)

Gradio 3.x has one pool of `concurrency_count` workers shared by every event; 4.0 replaced it with a
limit per event listener (`concurrency_limit`, default `default_concurrency_limit`). For an app with
one queued function the two mean the same; that is the "equivalent" an error names. A sweep over a
knob the target's release lacks fails before any point runs (`check_knobs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from qbench.errors import ScenarioError
from qbench.run import json_number

#: knob -> (releases that lack it, the equivalent to use there or "")
_MISSING: Final[dict[str, tuple[frozenset[int], str]]] = {
    "concurrency_count": (frozenset({4, 5, 6}), "default_concurrency_limit (or concurrency_limit per event)"),
    "concurrency_limit": (frozenset({3}), "concurrency_count (one pool of workers shared by every event)"),
    "default_concurrency_limit": (frozenset({3}), "concurrency_count (one pool of workers shared by every "
                                                  "event)"),
    "concurrency_id": (frozenset({3}), ""),
    "ssr_mode": (frozenset({3, 4}), ""),
    "num_workers": (frozenset({3, 4, 5}), ""),  # 6.15 and later (an older 6.x: the hook says so)
}


class KnobVersionError(ScenarioError):
    """A swept knob does not exist in the target's Gradio release."""


def gradio_major(version: Any) -> int | None:
    """"3.50.2" -> 3; None for anything that does not start with a number."""
    head = str(version or "").split(".")[0]
    return int(head) if head.isdigit() else None


def check_knobs(knobs: Iterable[str], major: int | None, target: str) -> None:
    """Raise KnobVersionError for the first knob Gradio `major` lacks (naming the equivalent)."""
    if major is None:
        return
    for knob in knobs:
        lacking, equivalent = _MISSING.get(knob.partition("@")[0], (frozenset(), ""))
        if major in lacking:
            instead = f"; the equivalent there is {equivalent}" if equivalent else "; it has no equivalent"
            raise KnobVersionError(
                f"{target} is Gradio {major}.x, which has no {knob!r} knob{instead}. Sweep the "
                "equivalent instead (or drop the axis)"
            )


BATCH_NOTE = "# fn must take lists (one per input) and return lists: batch=True"  # a batched event's code


def gradio3_code(knobs: Mapping[str, Any], max_size: int | None) -> str:
    """Gradio 3.x settings: one worker pool, batching per event, max_threads at least the pool."""
    count = knobs.get("concurrency_count", 1)
    batch = json_number(knobs.get("max_batch_size", 1)) or 0.0
    threads = knobs.get("max_threads", 40)
    if isinstance(count, int) and isinstance(threads, int):
        threads = max(threads, count)  # what 3.x's launch() does anyway: said explicitly
    lines = [f"demo.queue(concurrency_count={count}, max_size={max_size})"]
    if batch > 1:
        lines.insert(0, BATCH_NOTE)
        lines.append(f"btn.click(fn, inputs, outputs, batch=True, max_batch_size={knobs['max_batch_size']})")
    lines.append(f"demo.launch(max_threads={threads})")
    return "\n".join(lines)
