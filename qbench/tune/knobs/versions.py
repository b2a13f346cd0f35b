"""Gradio's queue knobs per release: which exist where (3.x's one worker pool, 4.x's limit per event), the
equivalent where one is missing, and the 3.x code to paste."""

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
