"""The sentences about an app's errors (qbench.run.diagnose.app_errors): an app that raised on most
requests, events still running at the end, a cut download, and inputs shown short."""

from __future__ import annotations

from typing import Any

from qbench.run.diagnose.app_errors import explain, short
from qbench.run.records import RequestRecord
from qbench.run.scenario.payloads import FileValue
from tests.run.conftest import scenario


def _record(n: int, kind: str | None, message: str = "", age: float = 0.0, outputs: int = 0) -> RequestRecord:
    record = RequestRecord(request_id=n, user_id=0, session_id="s", endpoint="predict", warmup=False,
                           intended_at_s=float(n))
    record.sent_at_s = float(n)
    record.completed_at_s = float(n) + age
    record.outcome = "ok" if kind is None else "error"
    record.error_kind, record.error_message, record.outputs = kind, message or None, outputs
    return record


def _scenario() -> Any:
    return scenario(endpoint={"api_name": "predict"}, payload={"inputs": [{"text": {"words": [2, 2]}}]},
                    load={"burst": 1})


def test_an_app_that_raises_without_show_error_is_explained() -> None:
    records = [_record(n, "server_error", "Error") for n in range(14)]
    (note,) = explain(records, _scenario())
    assert note.startswith("/predict: the app raised on 14/14 requests; Gradio hides the reason unless the "
                           "app sets show_error=True")
    assert 'the first input sent was ["' in note and "--show-inputs" in note


def test_an_app_that_raises_with_show_error_names_its_message_and_state_inputs() -> None:
    records = [_record(n, "server_error", "invalid literal for int()") for n in range(3)] + [_record(3, None)]
    config = {"components": [{"id": 1, "type": "state"}, {"id": 2, "type": "textbox"}],
              "dependencies": [{"api_name": "predict", "inputs": [1, 2]}]}
    (note,) = explain(records, _scenario(), {"config": config})
    assert note.startswith("/predict: the app raised on 3/4 requests: invalid literal for int()")
    assert "1 gr.State input(s), which a new session sends empty" in note


def test_a_few_errors_are_not_the_app_raising() -> None:
    assert explain([_record(0, "server_error", "Error")] + [_record(n, None) for n in range(1, 5)]) == []


def test_events_still_running_at_the_end_say_their_age_not_timeout() -> None:
    records = [_record(0, "deadline", "still running", age=4.0, outputs=3),
               _record(1, "deadline", "still running", age=2.5)]
    (note,) = explain(records, _scenario())
    assert note == ("/predict: 2 event(s) still running at the end of the run, 2.5 to 4.0 s old, within the "
                    "60 s timeout; 1 had streamed outputs: they take longer than the run, they did not time "
                    "out (a longer load.duration or load.drain lets them finish)")


def test_inputs_are_shown_short() -> None:
    shown = short([FileValue(b"x" * 2048, "a.zip", "application/zip"), "hi"])
    assert shown == '["<file a.zip, 2.0 KiB>","hi"]'
    long = short(["w" * 500])
    assert len(long) == 160 and long.endswith("...")


def test_a_cut_download_is_explained() -> None:
    message = ("download http://h/gradio_api/file=/tmp/a.wav: ClientPayloadError: Not enough data to satisfy "
               "content length header")
    (note,) = explain([_record(0, "stream_broken", message)] + [_record(n, None) for n in range(1, 9)])
    assert note.startswith("/predict: 1 output file download(s) ended short of their length: Gradio writes")
