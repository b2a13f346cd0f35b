"""A gradio.Server app's inputs from the JSON schema of each `@server.api` parameter
(qbench.run.protocols.gradio_schema), and the app end to end: init, run, a sweep's advice in its own form."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.control import read_gradio_mode
from qbench.run.protocols.gradio_schema import api_suggestion, concrete
from qbench.tune.ranking.recommend import Advice, recommend, server_api_code
from qbench.tune.values.constraints import Constraints
from qbench.tune.values.result import PointResult
from tests.run.gradio_app_process import gradio_app


def spec(name: str, schema: dict[str, Any], default: Any = None, has_default: bool = False
         ) -> dict[str, Any]:
    """The payload input made for one parameter of an @server.api function (its /info entry)."""
    made = api_suggestion({"parameter_name": name, "type": schema, "parameter_default": default,
                           "parameter_has_default": has_default, "component": "Api"})
    assert made is not None, schema
    return made[0]


def test_each_json_type_gets_a_generator_of_its_type() -> None:
    assert spec("name", {"type": "string"}) == {"text": {"words": [2, 8]}}
    assert spec("seconds", {"type": "string"})["choice"]["values"][0] == "1"  # its name asks for a number
    assert spec("mode", {"type": "string", "enum": ["a", "b"]}) == {"choice": {"values": ["a", "b"]}}
    assert spec("times", {"type": "integer"}, 3, True) == {"number": {"min": 3, "max": 7, "integer": True}}
    bounded = {"type": "number", "minimum": 0.1, "maximum": 0.9}
    assert spec("t", bounded) == {"number": {"min": 0.1, "max": 0.9}}
    assert spec("loud", {"type": "boolean"}, False, True) == {"boolean": {"true_share": 0.5}}
    scores = {"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "number"}}]}
    assert spec("scores", scores) == {"json": ["{float}"] * 3}
    point = {"type": "object", "properties": {"x": {"type": "integer"}, "label": {"type": "string"}}}
    assert spec("p", point) == {"json": {"x": "{int}", "label": "{word}"}}
    assert api_suggestion({"parameter_name": "f", "type": {"$ref": "#/defs/FileData"}}) is None  # fallback


def test_nullable_types_take_their_concrete_branch() -> None:
    assert concrete({"type": ["null", "integer"]}) == {"type": "integer"}
    assert concrete({"anyOf": [{"type": "null"}]}) == {"type": "null"}
    assert concrete("not a schema") is None


def test_the_advice_for_a_server_app_is_its_server_api_arguments() -> None:
    code = server_api_code({"concurrency_limit": 4, "max_batch_size": 8, "max_threads": 40}, 120, "greet")
    expected = "@server.api(name='greet', concurrency_limit=4, batch=True, max_batch_size=8)"
    assert code.splitlines()[1] == expected
    assert "server.launch(max_threads=40)" in code and "max_size=120 was advised" in code
    assert "demo.queue" not in code and "btn.click" not in code
    winner = PointResult("c4", {"concurrency_limit": 4}, "ok", goodput_rps=10.0, p95_latency_s=0.2)
    rec = recommend([winner], Constraints(slo={"p95_latency_s": 1.0}), Advice(server_api="greet"))
    assert rec.gradio_code.startswith("@server.api(name='greet', concurrency_limit=4)")


APP = textwrap.dedent('''
    import sys
    import time

    import gradio as gr

    server = gr.Server()


    @server.api(name="greet", concurrency_limit=2)
    def greet(name: str, times: int = 1, loud: bool = False, scores: list[float] | None = None) -> str:
        time.sleep(0.02)
        if not isinstance(name, str) or not isinstance(times, int) or not isinstance(loud, bool):
            raise ValueError(f"bad input types: {name!r} {times!r} {loud!r}")
        if scores is not None and not all(isinstance(s, (int, float)) for s in scores):
            raise ValueError(f"scores must be numbers: {scores!r}")
        out = f"hello {name} " * times
        return out.upper() if loud else out


    if __name__ == "__main__":
        server.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]))
''')


@pytest.fixture(scope="module")
def server_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("server-app")
    with gradio_app(folder, APP) as url:
        yield url, folder


def test_init_then_run_on_a_server_app_sends_values_its_function_takes(server_app: tuple[str, Path]) -> None:
    url, folder = server_app
    assert read_gradio_mode(url) == "server"
    scenario = folder / "greet.yaml"
    out = CliRunner().invoke(app, ["init", url, "-o", str(scenario), "--force"])
    assert out.exit_code == 0, out.output
    text = scenario.read_text()
    assert "Api 'name': text" in text and "Api 'times': a whole number from 1 to 5" in text
    assert "value: '...'" not in text
    text = text.replace("duration: 30 ", "duration: 2 ").replace("warmup: 5 ", "warmup: 0 ")
    scenario.write_text(text)
    run_dir = folder / "run"
    done = CliRunner().invoke(app, ["run", str(scenario), "--out", str(run_dir), "--no-live"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] > 0 and summary["errors"] == 0, done.output


SWEPT_APP = textwrap.dedent('''
    import time

    import gradio as gr

    server = gr.Server()


    @server.api(name="greet", concurrency_limit=2)
    def greet(name: str, times: int = 1) -> str:
        time.sleep(0.02)
        return f"hello {name} " * times


    if __name__ == "__main__":
        server.launch()
''')


def test_a_sweep_of_a_server_app_advises_its_server_api_arguments(tmp_path: Path) -> None:
    """`qbench sweep --app` on a gradio.Server app: the knob reaches @server.api, and the advice is the
    app's own `@server.api(...)`, not demo.queue / btn.click code it does not have."""
    (tmp_path / "app.py").write_text(SWEPT_APP)
    scenario = {"name": "greet", "target": "http://127.0.0.1:7860", "protocol": "gradio",
                "endpoint": {"api_name": "greet"},
                "payload": {"inputs": [{"text": {"words": [2, 8]}}, {"number": {"min": 1, "max": 3,
                                                                                "integer": True}}]},
                "load": {"users": 2, "duration": 1, "warmup": 0, "timeout": 30}, "slo": {"p95_latency_s": 5}}
    path = tmp_path / "greet.yaml"
    path.write_text(json.dumps(scenario))
    out = CliRunner().invoke(app, ["sweep", str(path), "--app", str(tmp_path / "app.py"), "--grid",
                                   "concurrency_limit=1,2", "--capacity-trials", "0", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    (folder,) = tmp_path.glob("sweep-*")
    rec = json.loads((folder / "recommendation.json").read_text())
    assert rec["gradio_code"].startswith("@server.api(name='greet', concurrency_limit=")
    assert "demo.queue" not in rec["gradio_code"] and "gradio.Server app's settings" in out.output
