"""`qbench init` (qbench.run.target.draft, draft_yaml, protocols.gradio_api): the generator chosen per
component, endpoints read from /config and /info, and the scenario written for the reference server's Gradio
and OpenAI fronts, run as written. docs/scenarios-from-your-app.md's commands run here (2 s runs)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import TargetError
from qbench.run.protocols.gradio_api import AppInput, app_endpoints, expected_inputs, suggest
from qbench.run.records.schema import read_records
from qbench.run.target.draft import HttpTarget, OpenAITarget, draft_for
from reference_server.settings import ServerSettings, parse_settings, preset_path, read_settings_file
from reference_server.testing import RunningServer, serve_in_thread

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "scenarios-from-your-app.md"
SHORT = ["--set", "load.duration=2", "--set", "load.warmup=0", "--set", "load.ramp_up=0", "--no-live"]
SHORT_REQUESTS = ["--set", "load.duration=null", "--set", "load.requests=8", *SHORT[2:]]


# ---------------------------------------------------------------- one generator per component


@pytest.mark.parametrize(("component", "props", "expected"), [
    ("textbox", {"lines": 1}, {"text": {"words": [5, 20]}}),
    ("textbox", {"lines": 4}, {"text": {"words": [20, 100]}}),
    ("textbox", {"lines": 1, "max_length": 50}, {"text": {"words": [5, 5]}}),  # never over 50 characters
    ("textbox", {"lines": 1, "max_length": 20}, {"text": {"words": [2, 2]}}),
    ("slider", {"minimum": 0, "maximum": 1, "step": 0.05}, {"number": {"min": 0, "max": 1, "step": 0.05}}),
    ("number", {"minimum": 0, "maximum": 100, "precision": 0},
     {"number": {"min": 0, "max": 100, "integer": True}}),
    ("number", {"precision": 0}, {"number": {"min": 0, "max": 100, "integer": True}}),  # 3.x: no range
    ("number", {"minimum": 5, "value": 50}, {"number": {"min": 5, "max": 105}}),  # one bound
    ("dropdown", {"choices": [["Fast", "fast"], ["Slow", "slow"]]}, {"choice": {"values": ["fast", "slow"]}}),
    ("radio", {"choices": ["a", "b"]}, {"choice": {"values": ["a", "b"]}}),  # before 3.50: bare values
    ("dropdown", {"choices": [["x", "x"], ["y", "y"], ["z", "z"]], "multiselect": True, "max_choices": 2},
     {"choice": {"values": ["x", "y", "z"], "pick": [1, 2]}}),
    ("checkboxgroup", {"choices": [["g", "g"]]}, {"choice": {"values": ["g"], "pick": [1, 1]}}),
    ("checkbox", {}, {"boolean": {"true_share": 0.5}}),
    ("image", {"type": "pil"}, {"image": {"width": 224, "height": 224, "format": "jpeg"}}),
    ("audio", {"min_length": 3, "max_length": 10}, {"audio": {"seconds": 3, "sample_rate": 16000}}),
    ("file", {"file_count": "multiple"}, {"file": {"kb": [4, 64], "suffix": ".txt", "count": [1, 3]}}),
    ("file", {"file_types": ["image"]}, {"image": {"width": 224, "height": 224, "format": "jpeg"}}),
    ("file", {"file_types": [".csv"]}, {"file": {"kb": [4, 64], "suffix": ".csv"}}),
    ("file", {"file_types": [".png"]}, {"image": {"width": 224, "height": 224, "format": "png"}}),
    ("chatbot", {"type": "messages"}, {"chat": {"turns": [0, 3], "words": [5, 20], "format": "messages"}}),
    ("chatbot", {}, {"chat": {"turns": [0, 3], "words": [5, 20], "format": "tuples"}}),
    ("multimodaltextbox", {}, {"json": {"text": "{words}", "files": []}}),
    ("colorpicker", {"value": "#123456"},
     {"choice": {"values": ["#123456", "#ff0000", "#00ff00", "#0000ff", "#f5a623", "#000000", "#ffffff"]}}),
])
def test_each_component_gets_a_generator_within_its_constraints(
        component: str, props: dict[str, Any], expected: dict[str, Any]) -> None:
    assert suggest(AppInput(component, "x", props), (4, 44, 1)).spec == expected


def test_release_specific_choices() -> None:
    assert suggest(AppInput("chatbot", "c", {"type": "messages"}), (6, 31)).spec["chat"]["format"] == "parts"
    video = suggest(AppInput("video", "v", {}))
    assert not video.fill_in and video.spec == {"file": {"kb": [16, 32], "suffix": ".avi"}}


def test_examples_win_unless_they_are_outside_the_choices() -> None:
    text = suggest(AppInput("textbox", "t", {}, examples=("a cat", "a dog")))
    assert text.spec == {"example": {"values": ["a cat", "a dog"]}}
    assert text.alternative == {"text": {"words": [5, 20]}}
    bad = AppInput("dropdown", "d", {"choices": [["a", "a"]]}, examples=("zzz",))
    assert suggest(bad).spec == {"choice": {"values": ["a"]}}
    files = [({"path": "/tmp/g/cat.jpg", "url": "http://h/file=/tmp/g/cat.jpg"}, "http://h/file=/tmp/g/cat.jpg"),
             ({"path": "/tmp/g/cat.jpg", "url": None}, "file=/tmp/g/cat.jpg"),  # to fetch from the API root
             ("/srv/app/cat.jpg", "file=/srv/app/cat.jpg")]  # 3.x: the example's server path
    for sample, ref in files:
        image = suggest(AppInput("image", "i", {}, examples=(sample,)))
        assert image.spec == {"example": {"values": [{"file": ref}]}} and image.remote_files
        assert image.alternative == {"image": {"width": 224, "height": 224, "format": "jpeg"}}
    inline = AppInput("image", "i", {}, examples=("data:image/png;base64,AAAA",))
    assert "image" in suggest(inline).spec  # not a file qbench can fetch: generated


CONFIG_3X: dict[str, Any] = {  # the shape of a 3.50 /config: no dependency ids, no skip_api
    "version": "3.50.2",
    "components": [
        {"id": 1, "type": "textbox", "props": {"label": "Prompt"}},
        {"id": 2, "type": "state", "props": {}},
        {"id": 3, "type": "slider", "props": {"label": "Steps", "minimum": 1, "maximum": 50, "step": 1}},
        {"id": 4, "type": "dataset",
         "props": {"component_ids": [1, 3], "samples": [["hi", 5], ["yo", None]]}},
    ],
    "dependencies": [
        {"api_name": "generate", "inputs": [1, 2, 3], "types": {"generator": True}},
        {"api_name": False, "inputs": [1]},
        {"api_name": "hidden", "inputs": [], "show_api": False},
    ],
}


def test_endpoints_from_config_alone() -> None:
    generate, hidden = app_endpoints(CONFIG_3X)
    assert (generate.api_name, generate.fn_index) == ("generate", 0)
    assert generate.public and generate.generator
    assert [(i.component, i.label) for i in generate.inputs] == [("textbox", "Prompt"), ("slider", "Steps")]
    assert generate.inputs[0].examples == ("hi", "yo") and generate.inputs[1].examples == ()  # a cell empty
    assert not hidden.public
    listing = expected_inputs(generate)
    assert "1. Textbox 'Prompt'" in listing and "- number: {min: 1, max: 50, step: 1}" in listing


def test_info_decides_what_is_public() -> None:
    info = {"named_endpoints": {"/hidden": {"parameters": []}}}
    endpoints = app_endpoints(CONFIG_3X, info)
    assert [(e.api_name, e.public) for e in endpoints] == [("hidden", True), ("generate", False)]


def test_a_plain_http_template_uses_the_one_post_route_of_its_openapi() -> None:
    draft = draft_for(HttpTarget(["/v1/classify"]), None)
    assert draft.fill_in and draft.endpoint["path"] == "/v1/classify"
    assert "POST /v1/classify" in draft.about[0]
    assert draft_for(HttpTarget(["/a", "/b"]), None).endpoint["path"] == "/a"  # no /predict: the first
    assert draft_for(HttpTarget(["/a", "/predict"]), None).endpoint["path"] == "/predict"


def test_openai_model_choice() -> None:
    target = OpenAITarget(["a", "b"])
    assert draft_for(target, None).endpoint["model"] == "a"
    assert draft_for(target, "b").endpoint["model"] == "b"
    with pytest.raises(TargetError, match="no model 'c'; it lists: a, b"):
        draft_for(target, "c")


def test_an_openai_scenario_says_what_fits_its_protocol() -> None:
    """`qbench init --protocol openai` writes no Gradio words: where it was read from, what a timeout does
    to an OpenAI request, the token SLO keys (and that they need stream: true); it parses as written."""
    from qbench.run.scenario.credentials import Auth
    from qbench.run.scenario.schema import parse_scenario
    from qbench.run.target.draft_yaml import render

    text = render(draft_for(OpenAITarget(["tiny"]), None), "http://127.0.0.1:1", Auth(),
                  "qbench init http://127.0.0.1:1 --protocol openai")
    assert "Gradio" not in text and "from the server's GET /v1/models" in text
    assert "a timed-out request's connection is closed (the server stops generating)" in text
    assert "p95_ttft_s, the wait for a reply's first token" in text and "endpoint.stream: true" in text
    assert "# stream: true times every token" in text
    parsed = parse_scenario(yaml.safe_load(text))
    assert parsed.protocol == "openai" and parsed.endpoint.stream and parsed.slo is not None


def test_new_generators_are_validated_with_file_key_and_value(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("target: http://127.0.0.1:1\nendpoint: {api_name: x}\nload: {burst: 1}\n"
                        "payload: {inputs: [{choice: {values: [a], pick: [1, 3]}},\n"
                        "                   {boolean: {true_share: 2}}]}\n")
    out = CliRunner().invoke(app, ["run", str(scenario), "--no-live"])
    assert out.exit_code == 2
    assert str(scenario) in out.output and "key 'payload.inputs.0.choice'" in out.output
    assert "0 <= min <= max <= 1" in out.output
    assert "key 'payload.inputs.1.boolean.true_share': value 2" in out.output


# ---------------------------------------------------------------- the reference server


def tiny(preset: str, **extra: Any) -> ServerSettings:
    raw = read_settings_file(preset_path(preset))
    for fn in raw["functions"]:
        if fn["workload"] not in ("tokens", "echo", "sleep"):
            fn["params"] = {**fn.get("params", {}), "size": "tiny"}
    return parse_settings({**raw, **extra}, f"preset {preset} (tiny)")


@pytest.fixture(scope="module")
def image_server() -> Iterator[RunningServer]:
    with serve_in_thread(tiny("image"), startup_timeout_s=120) as server:
        yield server


def qbench(*args: str) -> str:
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, f"qbench {shlex.join(args)} -> {out.exit_code}\n{out.output}"
    return out.output


def assert_all_ok(run_dir: Path) -> None:
    records = read_records(run_dir)
    assert records and all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]


def doc_commands() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    lines = [ln.split(" #", 1)[0].strip().rstrip("&").strip()
             for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M) for ln in block.splitlines()]
    return [ln for ln in lines if ln]


def as_args(command: str, url: str, folder: Path) -> tuple[dict[str, str], list[str]]:
    """A docs command's environment and qbench arguments: the URL and the written files moved."""
    words = shlex.split(command)
    env = {}
    while re.match(r"^[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "qbench", command
    return env, [url if w == "http://127.0.0.1:7860" else str(folder / w) if w.endswith(".yaml") else w
                 for w in words[1:]]


def test_the_docs_commands_run(image_server: RunningServer, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command of docs/scenarios-from-your-app.md: the image preset's, the login's (echo preset
    with alice:wonderland), the OpenAI front's (tokens preset); runs of 2 s, capacity probes of 1-1.5 s."""
    commands = doc_commands()
    assert commands[0] == "qbench serve --preset image" and "qbench serve --preset tokens" in commands
    login = serve_in_thread(tiny("echo", auth={"users": {"alice": "wonderland"}}))
    tokens = serve_in_thread(tiny("tokens"))
    with login as login_server, tokens as tokens_server:
        url = image_server.url
        for command in commands:
            if command.startswith("qbench serve"):
                url = {"image": image_server.url, "tokens": tokens_server.url}[command.split()[-1]]
                continue
            if "--auth" in command or "login.yaml" in command:
                url = login_server.url
            env, args = as_args(command, url, tmp_path)
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            run_docs_command(args, tmp_path / f"out{commands.index(command)}")


#: A docs run sized in requests, not seconds (two rounds of the 4 users init writes): a closed loop sends
#: as fast as the machine allows, so a run of N seconds holds what the box did in them.
DOCS_RUN_REQUESTS = 8
DOCS_RUN = ["--set", "load.duration=null", "--set", f"load.requests={DOCS_RUN_REQUESTS}",
            "--set", "load.warmup=0", "--set", "load.ramp_up=0", "--no-live"]


def run_docs_command(args: list[str], out: Path) -> None:
    if args[0] == "run":
        qbench(*args, "--out", str(out), *DOCS_RUN)
        assert_all_ok(out)
        if "--api" in args:  # the scenario it used, saved beside the records, runs again
            assert "name: classify" in (out / "scenario.yaml").read_text()
    elif args[0] == "capacity":
        # reduced: 0.5-s probes, bisection probes as long (the tiny image model serves ~200/s, which
        # the default 30-s bisection bound would hold for each probe), no overload run
        output = qbench(*args, "--duration", "0.5", "--warmup", "0", "--estimate-users", "4",
                        "--max-duration", "0.5", "--no-confirm", "--no-overload", "--out", str(out))
        assert "scenario written from the app" in output and list(out.glob("scenario-classify-*.yaml"))
    else:
        qbench(*args)


@pytest.mark.parametrize(("preset", "api"), [("tokens", "tokens"), ("chat", "generate")])
def test_init_then_run_on_the_openai_front_and_the_gradio_front_of_one_server(
        preset: str, api: str, tmp_path: Path) -> None:
    """The tokens preset (synthetic) and the chat preset (a tiny GPT-2 decoding for real)."""
    with serve_in_thread(tiny(preset), startup_timeout_s=120) as server:
        first = CliRunner().invoke(app, ["init", server.url])
        as_gradio = first.stdout
        assert "also answers /v1/models" in first.stderr
        as_openai = CliRunner().invoke(app, ["init", server.url, "--protocol", "openai"]).stdout
        assert yaml.safe_load(as_gradio)["endpoint"] == {"api_name": api}
        raw = yaml.safe_load(as_openai)
        assert raw["protocol"] == "openai" and raw["endpoint"]["model"] == api
        for name, text in (("gradio", as_gradio), ("openai", as_openai)):
            (tmp_path / f"{name}.yaml").write_text(text)
            # two rounds of init's users, without the SLO it drafts: it runs, whatever this box's speed
            # (a busy box's tiny GPT-2 took its first token 3.5 s late, past the 2 s p95_ttft_s drafted)
            qbench("run", str(tmp_path / f"{name}.yaml"), "--out", str(tmp_path / name), *SHORT_REQUESTS,
                   "--set", "slo=null")
            assert_all_ok(tmp_path / name)


def test_a_plain_http_server_gets_a_template_to_fill_in(tmp_path: Path) -> None:
    with serve_in_thread(tiny("echo")) as server:
        args = ["init", server.url, "--protocol", "http", "-o", str(tmp_path / "h.yaml")]
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 0, out.output
        text = (tmp_path / "h.yaml").read_text()
        assert "FILL IN" in text and "protocol: http" in text and "fill in endpoint.path" in out.output
        refused = CliRunner().invoke(app, ["init", "http://127.0.0.1:9", "-o", str(tmp_path / "x.yaml")])
        assert refused.exit_code == 2 and "cannot connect" in refused.output


def test_api_goes_without_a_scenario_file(tmp_path: Path) -> None:
    for command in ("run", "capacity", "sweep"):
        out = CliRunner().invoke(app, [command, "scenarios/image.yaml", "--api", "classify"])
        assert out.exit_code == 2 and "applies without a scenario file" in out.output, out.output
    out = CliRunner().invoke(app, ["run", "--api", "classify"])
    assert out.exit_code == 2 and "or --target URL (and --api NAME)" in out.output


def test_init_refuses_to_overwrite(image_server: RunningServer, tmp_path: Path) -> None:
    target = tmp_path / "s.yaml"
    target.write_text("mine")
    out = CliRunner().invoke(app, ["init", image_server.url, "-o", str(target)])
    assert out.exit_code != 0 and "--force" in out.output and target.read_text() == "mine"
    qbench("init", image_server.url, "-o", str(target), "--force")
    assert "api_name: classify" in target.read_text()


def test_sweep_without_a_file_writes_the_scenario_into_its_folder(image_server: RunningServer,
                                                                    tmp_path: Path) -> None:
    """`qbench sweep --target URL --api NAME`: client knobs of a running app, from its own scenario."""
    out = qbench("sweep", "--target", image_server.url, "--api", "classify", "--grid", "users=1,2",
                 "--duration", "1", "--capacity-trials", "0", "--out", str(tmp_path))
    (written,) = tmp_path.glob("scenario-classify-*.yaml")
    assert f"scenario written from the app (edit and re-run): {written}" in " ".join(out.split())
    (sweep_dir,) = tmp_path.glob("sweep-classify-*")
    assert (sweep_dir / "recommendation.json").exists()


def test_a_server_with_only_v1_models_is_read_as_openai() -> None:
    """No /config: `auto` asks /v1/models next (vLLM, TGI, llama.cpp publish no Gradio config)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the handler's name)
            found = self.path == "/v1/models"
            body = json.dumps({"object": "list", "data": [{"id": "llama-3-8b"}, {"id": "qwen"}]}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if found else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        raw = yaml.safe_load(qbench("init", url))
        assert raw["protocol"] == "openai" and raw["endpoint"]["model"] == "llama-3-8b"
        assert yaml.safe_load(qbench("init", url, "--api", "qwen"))["endpoint"]["model"] == "qwen"
    finally:
        server.shutdown()


def test_init_mix_writes_every_endpoint_and_the_run_sends_each(tmp_path: Path) -> None:
    """`qbench init URL --mix` on the abc preset (Gradio's guide's three functions): a mix of /a, /b, /c
    with equal weights that runs as written; each endpoint gets requests and its own service time."""
    from reference_server.settings import load_preset

    with serve_in_thread(load_preset("abc")) as server:
        written = tmp_path / "mix.yaml"
        qbench("init", server.url, "--mix", "-o", str(written))
        raw = yaml.safe_load(written.read_text())
        assert "endpoint" not in raw and [e["endpoint"] for e in raw["mix"]] == [
            {"api_name": "a"}, {"api_name": "b"}, {"api_name": "c"}]
        assert [e["weight"] for e in raw["mix"]] == [1, 1, 1]
        qbench("run", str(written), "--out", str(tmp_path / "run"), "--set", "load.users=6",
               "--set", "load.think_time=0", *SHORT)
        records = read_records(tmp_path / "run")
        assert records and all(r.ok for r in records)
        by_endpoint = {r.endpoint for r in records}
        assert by_endpoint == {"a", "b", "c"}, by_endpoint
        refused = CliRunner().invoke(app, ["init", server.url, "--mix", "--api", "a"])
        assert refused.exit_code == 2 and "leave out --api" in refused.output


def test_init_mix_needs_a_gradio_app() -> None:
    from qbench.run.target.draft import mix_drafts

    with pytest.raises(TargetError, match="--mix reads a Gradio app's endpoints"):
        mix_drafts(OpenAITarget(["m"]), None)
