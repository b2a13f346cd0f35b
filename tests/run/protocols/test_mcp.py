"""`protocol: mcp` (qbench.run.protocols.mcp): MCP tool calls over Streamable HTTP, on a real Gradio app
launched with mcp_server=True and on the official SDK's server (FastMCP: progress, sessions, expiry),
and the JSON-RPC answers read without either."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.protocols.mcp import McpError, answer, parse_messages, tool_text
from qbench.run.scenario.schema import parse_scenario
from qbench.run.target.draft import mcp_candidates
from tests.run.gradio_app_process import gradio_app

pytest.importorskip("mcp", reason="the mcp SDK is not installed (pip install -e '.[test]')")

from tests.run.protocols.mcp_server import McpServer, mcp_server  # noqa: E402  (needs the SDK)


# ---------------------------------------------------------------- the answers
def test_answers_come_as_json_a_batch_or_an_sse_stream() -> None:
    reply = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "3"}]}}
    assert answer(parse_messages(json.dumps(reply).encode(), "application/json"), 3) == reply["result"]
    batch = [{"jsonrpc": "2.0", "method": "notifications/progress"}, reply]
    assert answer(parse_messages(json.dumps(batch).encode(), "application/json"), 3) == reply["result"]
    stream = (b"event: message\r\ndata: " + json.dumps(batch[0]).encode() + b"\r\n\r\n: ping\r\n\r\n"
              b"event: message\r\ndata: " + json.dumps(reply).encode() + b"\r\n\r\n")
    assert answer(parse_messages(stream, "text/event-stream"), 3) == reply["result"]
    assert tool_text(reply["result"]) == "3"


@pytest.mark.parametrize(("message", "kind", "fragment"), [
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid"}}, "http_4xx", "-32602"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}, "server_error", "boom"),
    ({"jsonrpc": "2.0", "id": 2, "result": {}}, "server_error", "no answer to request 1"),
    ({"jsonrpc": "2.0", "id": 1, "result": "3"}, "server_error", "without a result object"),
])
def test_a_json_rpc_error_is_an_error_kind_with_its_message(message: dict[str, object], kind: str,
                                                             fragment: str) -> None:
    with pytest.raises(McpError, match=fragment) as caught:
        answer([message], 1)
    assert caught.value.kind == kind


def scenario(**endpoint: object) -> dict[str, object]:
    return {"protocol": "mcp", "target": "http://127.0.0.1:1", "endpoint": endpoint,
            "payload": {"inputs": [{"text": {"words": [1, 2]}}]}, "load": {"burst": 1}}


@pytest.mark.parametrize(("endpoint", "fragment"), [
    ({"arguments": ["word"]}, "an mcp endpoint needs the tool to call"),
    ({"tool": "t", "arguments": ["word"], "progress": "sometimes"},
     "key 'endpoint.progress': value 'sometimes': Input should be a valid boolean"),
    ({"tool": "t", "arguments": []}, "names 0 argument(s) (none) for 1 payload input(s)"),
])
def test_an_mcp_scenario_names_its_tool_and_one_argument_per_input(endpoint: dict[str, object],
                                                                   fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(scenario(**endpoint), source="s.yaml")


def test_progress_is_an_mcp_setting_only() -> None:
    raw = {**scenario(tool="t", arguments=["w"]), "protocol": "http"}
    raw["endpoint"] = {"path": "/predict", "progress": False}
    with pytest.raises(ScenarioError, match="endpoint.progress false: .* apply to protocol: mcp only"):
        parse_scenario(raw, source="s.yaml")
    assert parse_scenario(scenario(tool="t", arguments=["w"]), source="s.yaml").endpoint.progress is None


@pytest.mark.parametrize(("url", "tried"), [
    ("http://h:1/mcp", [("http://h:1", "/mcp"), ("http://h:1/mcp", "/gradio_api/mcp/")]),
    ("http://h:1/gradio_api/mcp/", [("http://h:1", "/gradio_api/mcp"),
                                    ("http://h:1/gradio_api/mcp", "/gradio_api/mcp/")]),
    ("http://h:1/", [("http://h:1", "/gradio_api/mcp/"), ("http://h:1", "/mcp")]),
    ("http://h:1/app", [("http://h:1", "/app"), ("http://h:1/app", "/gradio_api/mcp/")]),
])
def test_init_tries_the_url_itself_then_gradios_mcp_path_under_it(url: str,
                                                                   tried: list[tuple[str, str]]) -> None:
    assert mcp_candidates(url) == tried


# ---------------------------------------------------------------- the SDK's own server (FastMCP)
def sdk_scenario(server: McpServer, tmp_path: Path, *, progress: bool | None = None, **load: object) -> Path:
    """A scenario calling the test server's `steps` tool with count 3 (3 progress notifications)."""
    origin, path = server.url.rsplit("/", 1)
    endpoint: dict[str, object] = {"path": "/" + path, "tool": "steps", "arguments": ["count"]}
    if progress is not None:
        endpoint["progress"] = progress
    raw = {"protocol": "mcp", "target": origin, "endpoint": endpoint, "payload": {"inputs": [{"value": 3}]},
           "load": {"warmup": 0, "timeout": 30, **load}}
    out = tmp_path / "steps.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def run_records(path: Path, tmp_path: Path) -> tuple[dict[str, Any], Any]:
    qbench("run", str(path), "--out", str(tmp_path / "run"), "--no-live")
    import pandas as pd

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return summary, pd.read_parquet(tmp_path / "run" / "records.parquet")


def test_progress_notifications_are_outputs_and_the_first_one_is_the_first_output(tmp_path: Path) -> None:
    """An SDK server sends progress only when the call has a progressToken: qbench sends one, as an
    agent with a progress callback does, and counts each notification as an output."""
    with mcp_server() as server:
        summary, records = run_records(sdk_scenario(server, tmp_path, users=1, requests=3), tmp_path)
        calls = server.calls()
    assert summary["errors"] == 0 and summary["requests"] == 3
    assert list(records["outputs"]) == [3, 3, 3]
    first, done, sent = records["first_output_at_s"], records["completed_at_s"], records["sent_at_s"]
    assert ((sent < first) & (first < done)).all()
    assert len(calls) == 3 and all(c.progress_token for c in calls)


def test_progress_false_asks_for_none(tmp_path: Path) -> None:
    with mcp_server() as server:
        summary, records = run_records(sdk_scenario(server, tmp_path, progress=False, users=1, requests=2),
                                       tmp_path)
        calls = server.calls()
    assert summary["errors"] == 0
    assert records["first_output_at_s"].isna().all() and not records["outputs"].fillna(0).any()
    assert len(calls) == 2 and not any(c.progress_token for c in calls)


def test_init_on_an_mcp_url_that_is_not_gradios(tmp_path: Path) -> None:
    """`qbench init http://HOST:PORT/mcp --mcp`: the path comes from the URL, the target is the origin."""
    with mcp_server() as server:
        path = tmp_path / "steps.yaml"
        out = qbench("init", server.url, "--mcp", "-o", str(path))
        raw = yaml.safe_load(path.read_text())
        origin = server.url.removesuffix("/mcp")
        assert "qbench-test over MCP (Streamable HTTP), tool steps (1 argument(s))" in out
        assert raw["target"] == origin and raw["endpoint"] == {"path": "/mcp", "tool": "steps",
                                                               "arguments": ["count"]}
        assert [h.http_method for h in server.hits if h.session is not None][-1] == "DELETE"  # its session
        bare = CliRunner().invoke(app, ["init", origin + "/nothing-here", "--mcp"])
    assert bare.exit_code != 0 and "/nothing-here" in bare.output and "gradio_api/mcp/" in bare.output


def test_each_user_has_its_own_session_and_every_session_is_deleted_at_the_end(tmp_path: Path) -> None:
    with mcp_server() as server:
        summary, records = run_records(sdk_scenario(server, tmp_path, users=3, requests=9), tmp_path)
        hits = list(server.hits)
    assert summary["errors"] == 0
    used = {h.session for h in hits if h.rpc == "tools/call"}
    assert len(used) == 3 and None not in used  # one per user, not one for all
    assert set(records["user_id"]) == {0, 1, 2}
    deleted = [h.session for h in hits if h.http_method == "DELETE"]
    assert sorted(deleted) == sorted(used)  # each once, after its last call
    last_call = max(i for i, h in enumerate(hits) if h.rpc == "tools/call")
    assert all(i > last_call for i, h in enumerate(hits) if h.http_method == "DELETE")


def test_an_open_loop_run_keeps_a_session_per_call_in_flight(tmp_path: Path) -> None:
    with mcp_server() as server:
        summary, _ = run_records(sdk_scenario(server, tmp_path, rate=10, duration=1.5), tmp_path)
        hits = list(server.hits)
    used = {h.session for h in hits if h.rpc == "tools/call"}
    calls = sum(1 for h in hits if h.rpc == "tools/call")
    assert summary["errors"] == 0 and calls >= 10
    assert 1 <= len(used) <= summary["generator"]["max_in_flight"]  # reused, not one per call
    assert sorted(h.session for h in hits if h.http_method == "DELETE") == sorted(used)


def test_a_session_pool_keeps_one_session_per_slot(tmp_path: Path) -> None:
    """`load.sessions: 2`: the open-loop run's calls go to two sessions, whatever is in flight."""
    with mcp_server() as server:
        summary, _ = run_records(sdk_scenario(server, tmp_path, rate=10, duration=1, sessions=2), tmp_path)
        hits = list(server.hits)
    used = {h.session for h in hits if h.rpc == "tools/call"}
    assert summary["errors"] == 0 and len(used) == 2
    assert sorted(h.session for h in hits if h.http_method == "DELETE") == sorted(used)


def test_an_expired_session_is_opened_again_and_the_call_sent_once_more(tmp_path: Path) -> None:
    """The server forgets a session idle for 1 s (the SDK's session_idle_timeout) and answers 404;
    with 2.5 s between calls every call after the first finds its session gone."""
    with mcp_server(idle_timeout_s=1.0) as server:
        summary, records = run_records(sdk_scenario(server, tmp_path, users=1, requests=3, think_time=2.5),
                                       tmp_path)
        hits = list(server.hits)
    assert summary["errors"] == 0, summary["error_samples"]
    assert list(records["outputs"]) == [3, 3, 3]
    expired = [h for h in hits if h.rpc == "tools/call" and h.status == 404]
    assert len(expired) >= 2
    assert sum(1 for h in hits if h.rpc == "tools/call" and h.status == 200) == 3
    assert sum(1 for h in hits if h.rpc == "initialize") >= 1 + len(expired)


# ---------------------------------------------------------------- a real Gradio app's MCP server
APP = textwrap.dedent('''
    import sys
    import time

    import gradio as gr


    def letter_counter(word: str, letter: str) -> int:
        """Count the occurrences of a letter in a word.

        Args:
            word: the word to look in
            letter: the letter to count
        """
        time.sleep(0.02)
        return word.lower().count(letter.lower())


    def divide(a: float, b: float) -> float:
        """Divide a by b.

        Args:
            a: the dividend
            b: the divisor
        """
        if b == 0:
            raise ValueError("division by zero")
        return a / b


    with gr.Blocks() as demo:
        gr.api(letter_counter, api_name="letter_counter")
        gr.api(divide, api_name="divide")

    demo.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]), mcp_server=True)
''')


@pytest.fixture(scope="module")
def mcp_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("mcp-app")
    with gradio_app(folder, APP) as url:
        yield url


def qbench(*args: str) -> str:
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return out.output


def short(path: Path, **load: object) -> Path:
    raw = yaml.safe_load(path.read_text())
    raw["load"] = {"users": 2, "duration": 2, "warmup": 0, "timeout": 30, **load}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_init_mcp_lists_the_tools_and_the_run_calls_one_with_no_error(mcp_app: str, tmp_path: Path) -> None:
    """docs/http-and-openai.md's commands: `qbench init URL --mcp --api letter_counter -o tools.yaml`, then
    `qbench run tools.yaml` (at 1 user for 2 s: at 2, Gradio's MCP server now and then answers a call
    isError with no text, which qbench rightly counts as an error; docs/http-and-openai.md says so)."""
    path = tmp_path / "tools.yaml"
    out = qbench("init", mcp_app, "--mcp", "--api", "letter_counter", "-o", str(path))
    assert "tool letter_counter (2 argument(s))" in out and "2 tools" in out
    text = path.read_text()
    assert "protocol: mcp" in text and "arguments: [word, letter]" in text
    assert "argument 'word' (the word to look in): text" in text
    qbench("run", str(short(path, users=1)), "--out", str(tmp_path / "run"), "--no-live")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["requests"] > 0 and summary["errors"] == 0
    import pandas as pd

    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert set(records["endpoint"]) == {"mcp:letter_counter"} and (records["bytes_received"] > 0).all()
    ok = records[records["outcome"] == "ok"]  # asked for progress, Gradio sends its status updates
    assert (ok["outputs"] >= 1).all() and ok["first_output_at_s"].notna().all()


@pytest.mark.parametrize(("progress", "says"), [
    (True, "Error!"),  # followed by its status updates, Gradio's failed job says only "Error!"
    (False, "show_error=True"),  # its plain path says why it hides the exception
])
def test_a_tool_that_raises_is_a_server_error_with_its_text(mcp_app: str, tmp_path: Path, progress: bool,
                                                            says: str) -> None:
    path = tmp_path / "divide.yaml"
    qbench("init", mcp_app, "--mcp", "--api", "divide", "-o", str(path))
    raw = yaml.safe_load(path.read_text())
    raw["payload"]["inputs"] = [{"value": 1}, {"value": 0}]  # every call divides by zero
    raw["endpoint"]["progress"] = progress
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = CliRunner().invoke(app, ["run", str(short(path, users=1)), "--out", str(tmp_path / "run"),
                                   "--no-live"])
    import pandas as pd

    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert set(records["error_kind"].dropna()) == {"server_error"}, out.output
    message = str(records["error_message"].dropna().iloc[0])  # Gradio hides the exception without show_error
    assert message.startswith("tool divide raised: ") and says in message


def test_a_tool_it_does_not_have_is_refused_before_any_load(mcp_app: str, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**scenario(tool="nope", arguments=["word"]), "target": mcp_app}))
    out = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "run"), "--no-live"])
    assert out.exit_code != 0 and "no tool 'nope'; it lists: " in " ".join(out.output.split())


def test_the_capacity_of_an_mcp_tool(mcp_app: str, tmp_path: Path) -> None:
    path = tmp_path / "letters.yaml"
    qbench("init", mcp_app, "--mcp", "--api", "letter_counter", "-o", str(path))
    warm = ["run", str(short(path)), "--out", str(tmp_path / "warm"), "--no-live"]
    CliRunner().invoke(app, warm)  # a cold app's first calls are slow (an error among them is no matter)
    qbench("capacity", str(path), "--slo", "p95_latency_s=2", "--duration", "2", "--max-probes", "3",
           "--start-rate", "5", "--no-confirm", "--no-overload", "--out", str(tmp_path / "cap"))
    (folder,) = (tmp_path / "cap").glob("capacity-*")
    found = json.loads((folder / "capacity.json").read_text())["result"]
    assert found["capacity_rps"] is not None and found["capacity_rps"] > 0
    assert any(p["passed"] and p["kind"] == "rate" for p in found["probes"])  # an open-loop rate held
