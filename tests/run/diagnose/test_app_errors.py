"""The sentences about an app's errors (qbench.run.diagnose.app_errors): an app that raised on most
requests, events still running at the end, a cut download, inputs shown short, and sessions split
across replicas (named as the balancer's only when one stands in front)."""

from __future__ import annotations

from typing import Any

import pytest

from qbench.run.diagnose.app_errors import explain, short, split_sessions
from qbench.run.records.schema import RequestRecord
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


NGINX = {"front": {"url": "http://127.0.0.1:7860", "server": "nginx/1.22.1", "upstream": "127.0.0.1:7861",
                   "qbench": True, "upstreams": ["127.0.0.1:7861", "127.0.0.1:7862"]}}
BEHIND = "(Server: nginx/1.22.1, qbench's nginx, 2 servers behind it: 127.0.0.1:7861, 127.0.0.1:7862)"
LOST = "404: Not Found: session not found: the server that answered the stream has no message queue"
MISSED = "input 'image': file '/tmp/u/ab/image-2-0.jpeg' was not uploaded to this server"


def test_uploads_that_missed_their_replica_name_the_balancer() -> None:
    records = [_record(n, "server_error", MISSED) for n in range(4)]
    records += [_record(n, None) for n in range(4, 10)]
    (note,) = explain(records, _scenario(), NGINX)
    assert note.startswith("4/10 requests' uploads reached another replica than their join")
    assert f"The balancer at http://127.0.0.1:7860 {BEHIND} does not keep a session on one replica" in note
    assert "/upload?session_hash=" in note and "/heartbeat/{session_hash}" in note
    assert "the app raised" not in note
    both = records + [_record(10, "server_error", LOST)]
    verdict = split_sessions(both, NGINX, short=True)
    assert verdict == ("1/11 streams found no session: the join and its stream reached different servers; "
                     "4/11 requests' uploads reached another replica than their join: the balancer at "
                     f"http://127.0.0.1:7860 {BEHIND} keeps no session affinity")


def test_a_session_lost_by_one_server_is_the_apps_error() -> None:
    """No balancer in front (discovery saw the app server's own headers): not a balancer finding."""
    records = [_record(0, "server_error", LOST)] + [_record(n, None) for n in range(1, 20)]
    for server in (None, {"config": {}}):
        assert split_sessions(records, server) == "" and split_sessions(records, server, short=True) == ""
        (note,) = explain(records, _scenario(), server)
        assert note.startswith("1/20 requests' streams (/queue/data) found no session ('session not found') "
                               "on a server with no balancer in front of it: the app lost sessions")
        assert "balancer at" not in note
    raised = [_record(n, "server_error", MISSED) for n in range(3)]  # one server: the app raised
    (note,) = explain(raised, _scenario())
    assert note.startswith("/predict: the app raised on 3/3 requests: input 'image'")


@pytest.mark.parametrize(("upstreams", "seen"), [
    (["127.0.0.1:7861"], "only 127.0.0.1:7861 behind it"),
    ([], "nothing that tells the servers behind it apart"),
])
def test_a_proxy_that_showed_one_server_is_no_balancer(upstreams: list[str], seen: str) -> None:
    """A TLS terminator or a proxy with one app behind it (Caddy, nginx) loses no session itself: one
    that showed one server behind it (or nothing to tell them apart) is not blamed; the lost sessions
    are the app's errors, and the sentence says what was seen and what would make it the proxy's."""
    caddy = {"front": {"url": "https://app.example", "server": "Caddy", "upstreams": upstreams}}
    records = [_record(0, "server_error", LOST)] + [_record(n, None) for n in range(1, 20)]
    assert split_sessions(records, caddy) == "" and split_sessions(records, caddy, short=True) == ""
    (note,) = explain(records, _scenario(), caddy)
    assert note.startswith("1/20 requests' streams (/queue/data) found no session ('session not found') "
                           f"behind the proxy at https://app.example (Server: Caddy), which showed {seen} "
                           "(if it spreads requests over several replicas, it keeps no session affinity")
    assert note.endswith("the app lost sessions it had accepted (it restarted, or dropped them); they count "
                         "as the app's errors")
    assert "balancer" not in note
