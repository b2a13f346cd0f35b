"""Gradio's queue knobs per release (qbench.tune.knobs.versions): the major of a version string, the knob a
release lacks (named with its equivalent), and Gradio 3.x's code to paste."""

from __future__ import annotations

from typing import Any

import pytest

from qbench.tune.knobs.versions import (
    BATCH_NOTE,
    KnobVersionError,
    check_knobs,
    gradio3_code,
    gradio_major,
)


@pytest.mark.parametrize(("version", "major"), [("3.50.2", 3), ("6.31.0", 6), ("4", 4), (None, None),
                                                 ("", None), ("dev", None), (5, 5)])
def test_gradio_major(version: Any, major: int | None) -> None:
    assert gradio_major(version) == major


def test_a_knob_the_release_lacks_is_named_with_its_equivalent() -> None:
    with pytest.raises(KnobVersionError) as caught:
        check_knobs(["max_batch_size", "concurrency_limit"], 3, "http://h:7860")
    assert str(caught.value) == (
        "http://h:7860 is Gradio 3.x, which has no 'concurrency_limit' knob; the equivalent there is "
        "concurrency_count (one pool of workers shared by every event). Sweep the equivalent instead "
        "(or drop the axis)")
    with pytest.raises(KnobVersionError, match="no 'concurrency_id@chat' knob; it has no equivalent"):
        check_knobs(["concurrency_id@chat"], 3, "t")  # a knob scoped to one event is the same knob
    with pytest.raises(KnobVersionError, match="Gradio 5.x, which has no 'num_workers'"):
        check_knobs(["num_workers"], 5, "t")


@pytest.mark.parametrize(("knobs", "major"), [
    (["concurrency_count", "max_threads", "max_size", "max_batch_size"], 3),
    (["concurrency_limit", "concurrency_id", "default_concurrency_limit", "ssr_mode", "num_workers"], 6),
    (["concurrency_count", "anything"], None),  # release unknown: nothing to check
])
def test_knobs_a_release_has_pass(knobs: list[str], major: int | None) -> None:
    check_knobs(knobs, major, "t")


def test_gradio3_code_raises_max_threads_to_the_pool_and_notes_batching() -> None:
    assert gradio3_code({"concurrency_count": 64, "max_threads": 40}, 100) == (
        "demo.queue(concurrency_count=64, max_size=100)\ndemo.launch(max_threads=64)")
    batched = gradio3_code({"concurrency_count": 2, "max_batch_size": 8}, None).splitlines()
    assert batched == [BATCH_NOTE, "demo.queue(concurrency_count=2, max_size=None)",
                       "btn.click(fn, inputs, outputs, batch=True, max_batch_size=8)",
                       "demo.launch(max_threads=40)"]
