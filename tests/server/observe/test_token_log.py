"""The OpenAI front's token log: one timeline per streamed completion, keyed by X-Request-Id."""

from __future__ import annotations

from starlette.testclient import TestClient

from reference_server.http.app import build_app
from reference_server.observe.token_log import TokenLog
from reference_server.settings import load_preset


def test_the_ring_keeps_the_newest_and_counts_what_it_dropped() -> None:
    log = TokenLog(capacity=2)
    for i in range(3):
        log.start(f"r{i}", f"c{i}", float(i))
    snap = log.snapshot()
    assert [t["request_id"] for t in snap["timelines"]] == ["r1", "r2"]
    assert (snap["kept"], snap["dropped"], snap["clock"]) == (2, 1, "perf_counter")
    assert log.start(None, "c9", 9.0).request_id == "c9"  # no client id: the completion id


def test_a_streamed_completion_logs_each_content_chunk() -> None:
    settings = load_preset("tokens").model_copy(deep=True)
    settings.functions[0].params.update(tokens=4, ttft_ms=5, interval_ms=2)
    with TestClient(build_app(settings)) as client:
        body = {"model": "tokens", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "max_tokens": 3}
        with client.stream("POST", "/v1/chat/completions", json=body,
                           headers={"X-Request-Id": "qbench-7"}) as resp:
            assert resp.status_code == 200
            chunks = [line for line in resp.iter_lines() if line.startswith("data: {")]
        client.post("/v1/chat/completions", json={**body, "stream": False})  # not streamed: not logged
        log = client.get("/status/tokens?clear=true").json()
        assert client.get("/status/tokens").json()["kept"] == 0
    (timeline,) = log["timelines"]
    assert timeline["request_id"] == "qbench-7" and timeline["completion_id"].startswith("chatcmpl-")
    assert timeline["finish_reason"] == "length" and len(timeline["token_at_s"]) == 3
    assert len(chunks) == 1 + 3 + 1  # the role chunk, three tokens, the finish chunk
    times = [timeline["received_at_s"], *timeline["token_at_s"]]
    assert times == sorted(times)
