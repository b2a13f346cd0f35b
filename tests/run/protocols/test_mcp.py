"""`protocol: mcp` (qbench.run.protocols.mcp): MCP tool calls over Streamable HTTP, on a real Gradio app
launched with mcp_server=True, and the JSON-RPC answers read without one."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.protocols.mcp import McpError, answer, parse_messages, tool_text
from qbench.run.scenario.scenario import parse_scenario
from tests.run.gradio_app_process import gradio_app

pytest.importorskip("mcp", reason="gradio[mcp] is not installed (pip install 'gradio[mcp]')")


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
    ({"tool": "t", "arguments": []}, "names 0 argument(s) (none) for 1 payload input(s)"),
])
def test_an_mcp_scenario_names_its_tool_and_one_argument_per_input(endpoint: dict[str, object],
                                                                   fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(scenario(**endpoint), source="s.yaml")


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


def test_a_tool_that_raises_is_a_server_error_with_its_text(mcp_app: str, tmp_path: Path) -> None:
    path = tmp_path / "divide.yaml"
    qbench("init", mcp_app, "--mcp", "--api", "divide", "-o", str(path))
    raw = yaml.safe_load(path.read_text())
    raw["payload"]["inputs"] = [{"value": 1}, {"value": 0}]  # every call divides by zero
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = CliRunner().invoke(app, ["run", str(short(path, users=1)), "--out", str(tmp_path / "run"),
                                   "--no-live"])
    import pandas as pd

    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert set(records["error_kind"].dropna()) == {"server_error"}, out.output
    message = str(records["error_message"].dropna().iloc[0])  # Gradio hides the exception without show_error
    assert message.startswith("tool divide raised: ") and "show_error=True" in message


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
