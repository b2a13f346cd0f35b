"""`qbench init` on real apps of every release: the scenario it writes runs with 0 errors.

One module-scoped app per release (tests/gradio_versions/components_app.py: Image, Textbox, Number,
Slider, Dropdown, Radio, Checkbox, CheckboxGroup, Audio, File, Video, a Blocks chat with a Chatbot input,
a ChatInterface; its functions reject any input a user of the UI could not send), and in the same
processes app.py behind a login (3.50.2, 6.x) and mounted under /demo (6.x). Runs are sized in
requests, not seconds: the 8 requests a 2 s run of the written 4 users (think_time 1 s) sent, sent back
to back, so a run costs the same on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records

from .envs import RELEASES, EnvError, ensure_env
from .servers import MAIN, serve_together

COMPONENTS_APP = Path(__file__).with_name("components_app.py")
VERSIONS = (*RELEASES, MAIN)
#: the written closed loop (users: 4), 8 requests in all, none thinking, none left out as warmup
SHORT = ["--set", "load.duration=null", "--set", "load.requests=8", "--set", "load.think_time=0",
         "--set", "load.warmup=0", "--set", "load.ramp_up=0", "--no-live"]
pytestmark = pytest.mark.slow


LOGIN = {"app": "app.py", "auth": [["alice", "wonderland"]]}  # tests/gradio_versions/app.py, auth=
MOUNTED = {"app": "app.py", "mount": "/demo"}  # app.py under gr.mount_gradio_app(path="/demo")
#: app.py's apps served beside the components app, in its process (one Gradio import per release)
BESIDE: dict[str, list[dict[str, Any]]] = {"3.50.2": [LOGIN], MAIN: [LOGIN, MOUNTED]}


@pytest.fixture(scope="module")
def component_apps() -> Iterator[dict[str, list[str]]]:
    """Version -> URLs of the components app, then of BESIDE's apps; all releases started at once, and
    stopped with this file's last test: an idle Gradio 6 app polls its queue every millisecond (~4% of a
    core each; the session scope kept these four processes ~490 s past their last request, ~50 s of
    CPU)."""
    ready = []
    for version in VERSIONS:
        try:
            if version != MAIN:
                ensure_env(version)
            ready.append(version)
        except EnvError as exc:  # named in the test that needs it, never dropped silently
            print(f"gradio {version}: no env: {exc}")
    apps = [(v, [{}, *BESIDE.get(v, [])]) for v in ready]
    with serve_together(apps, app=COMPONENTS_APP) as urls:
        yield dict(zip(ready, urls, strict=True))


def url_of(apps: dict[str, list[str]], version: str, beside: dict[str, Any] | None = None) -> str:
    """The components app of `version`, or (`beside`) the app.py app of BESIDE served beside it."""
    if version not in apps:
        pytest.skip(f"gradio {version}: its env could not be built")
    return apps[version][0 if beside is None else 1 + BESIDE[version].index(beside)]


def qbench(*args: str) -> str:
    """Run qbench in-process; its standard output (notes go to stderr)."""
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, f"qbench {' '.join(args)} -> {out.exit_code}\n{out.output}"
    return out.stdout


def assert_all_ok(run_dir: Path) -> None:
    records = read_records(run_dir)
    failed = [f"{r.error_kind}: {r.error_message}" for r in records if not r.ok]
    assert records and not failed, failed[:3]


@pytest.mark.parametrize("api", ["analyze", "form", "respond", "chat", "caption", "clip", "ask"])
@pytest.mark.parametrize("version", VERSIONS)
def test_init_then_run_has_no_errors(component_apps: dict[str, list[str]], version: str, api: str,
                                     tmp_path: Path) -> None:
    url = url_of(component_apps, version)
    if api == "ask" and version in ("3.50.2", "4.44.1"):
        pytest.skip("gr.ChatInterface takes api_name= from 5.0 (components_app.py serves /ask from 5.x)")
    written = tmp_path / "s.yaml"
    qbench("init", url, "--api", api, "-o", str(written))
    text = written.read_text()
    raw = yaml.safe_load(text)
    assert raw["endpoint"] == {"api_name": api} and raw["target"] == url
    kinds = [next(iter(spec)) for spec in raw["payload"]["inputs"]]
    assert kinds == EXPECTED_KINDS[api], text
    qbench("run", str(written), "--out", str(tmp_path / "run"), *SHORT)
    assert_all_ok(tmp_path / "run")


EXPECTED_KINDS = {
    "analyze": ["image", "number", "choice"],
    # the textbox and the radio have the app's examples (gr.Examples)
    "form": ["example", "number", "number", "boolean", "choice", "example", "choice", "audio", "file",
             "file"],
    "respond": ["text", "chat"],
    "chat": ["text"],
    "caption": ["example", "example"],  # the example images, downloaded beside the scenario, and texts
    "clip": ["file"],  # a generated .avi: the FileData on 6.x, {video, subtitles} on 4.x-5.x
    "ask": ["json"],  # {text: "{words}", files: []}
}


@pytest.mark.parametrize("version", VERSIONS)
def test_run_without_a_file_writes_the_same_scenario(component_apps: dict[str, list[str]], version: str,
                                                     tmp_path: Path) -> None:
    url = url_of(component_apps, version)
    printed = qbench("init", url, "--api", "analyze")
    qbench("run", "--target", url, "--api", "analyze", "--out", str(tmp_path / "run"), *SHORT)
    assert_all_ok(tmp_path / "run")
    saved = (tmp_path / "run" / "scenario.yaml").read_text()
    assert yaml.safe_load(saved) == yaml.safe_load(printed)
    qbench("run", str(tmp_path / "run" / "scenario.yaml"), "--out", str(tmp_path / "again"), *SHORT)
    assert_all_ok(tmp_path / "again")
    # the app's example files: saved in the run folder beside its scenario.yaml
    qbench("run", "--target", url, "--api", "caption", "--out", str(tmp_path / "examples"), *SHORT)
    assert_all_ok(tmp_path / "examples")
    assert sorted(p.name for p in (tmp_path / "examples" / "scenario-examples").iterdir()) == [
        "1-1-320x200.png", "1-2-100x150.png"]
    printed = yaml.safe_load(qbench("init", url, "--api", "caption"))  # no file to put them beside
    assert next(iter(printed["payload"]["inputs"][0])) == "image"


def test_several_endpoints_without_api(component_apps: dict[str, list[str]], tmp_path: Path) -> None:
    url = url_of(component_apps, MAIN)
    out = CliRunner().invoke(app, ["init", url, "-o", str(tmp_path / "s.yaml")])
    assert out.exit_code == 0, out.output
    assert "7 public endpoints; wrote /analyze" in out.output and "/respond(Textbox 'Message'" in out.output
    assert "#   /form(Textbox 'Prompt', Number 'Steps'" in (tmp_path / "s.yaml").read_text()
    refused = CliRunner().invoke(app, ["run", "--target", url, "--no-live"])
    assert refused.exit_code == 2 and "choose one with --api NAME" in refused.output
    assert "/chat(Textbox" in refused.output


def test_the_input_count_error_lists_the_inputs(component_apps: dict[str, list[str]], tmp_path: Path) -> None:
    url = url_of(component_apps, MAIN)
    scenario = tmp_path / "one.yaml"
    scenario.write_text(f"target: {url}\nendpoint: {{api_name: analyze}}\n"
                        "payload: {inputs: [{image: {width: 64, height: 64}}]}\nload: {burst: 1}\n")
    out = CliRunner().invoke(app, ["run", str(scenario), "--no-live", "--out", str(tmp_path / "r")])
    assert out.exit_code == 2
    text = " ".join(out.output.split())
    for part in ("takes 3 input(s), the scenario's payload.inputs has 1",
                 "1. Image 'img'", "- image: {width: 224, height: 224, format: jpeg}",
                 "2. Slider 'Size': a number from 1 to 10, step 1", "- number: {min: 1, max: 10, step: 1}",
                 "3. Dropdown 'Mode': one of fast, slow", "- choice: {values: [fast, slow]}"):
        assert part in text, out.output


@pytest.mark.parametrize("version", ["3.50.2", MAIN])
def test_an_app_behind_a_login(component_apps: dict[str, list[str]], version: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without credentials init says how to log in; with --auth the file logs in from ${APP_PASSWORD}."""
    url = url_of(component_apps, version, LOGIN)
    refused = CliRunner().invoke(app, ["init", url])
    assert refused.exit_code == 2 and "asks for a login: pass --auth USER:PASSWORD" in refused.output
    written = tmp_path / "s.yaml"
    qbench("init", url, "--api", "echo", "--auth", "alice:wonderland", "-o", str(written))
    text = written.read_text()
    assert "wonderland" not in text
    assert yaml.safe_load(text)["auth"] == {"login": {"username": "alice", "password": "${APP_PASSWORD}"}}
    monkeypatch.setenv("APP_PASSWORD", "wonderland")
    qbench("run", str(written), "--out", str(tmp_path / "run"), *SHORT)
    assert_all_ok(tmp_path / "run")
    qbench("run", "--target", url, "--api", "echo", "--auth", "alice:wonderland",
           "--out", str(tmp_path / "direct"), *SHORT)  # without a file: the same login
    assert_all_ok(tmp_path / "direct")
    assert "wonderland" not in (tmp_path / "direct" / "scenario.yaml").read_text()


def test_a_mounted_app(component_apps: dict[str, list[str]], tmp_path: Path) -> None:
    """gr.mount_gradio_app(app, demo, path="/demo"): the URL with its mount path is the app's root."""
    url = url_of(component_apps, MAIN, MOUNTED)
    assert url.endswith("/demo")
    written = tmp_path / "s.yaml"
    qbench("init", url, "--api", "image", "-o", str(written))
    assert yaml.safe_load(written.read_text())["payload"]["inputs"] == [
        {"image": {"width": 224, "height": 224, "format": "jpeg"}}]
    qbench("run", str(written), "--out", str(tmp_path / "run"), *SHORT)
    assert_all_ok(tmp_path / "run")


@pytest.mark.parametrize("version", VERSIONS)
def test_init_mix_then_run_has_no_errors(component_apps: dict[str, list[str]], version: str,
                                         tmp_path: Path) -> None:
    """`qbench init URL --mix`: every public endpoint of the app in one mix, run as written, 0 errors,
    and every endpoint of the mix is sent (records name each): 28 requests at 14/s, whose endpoints
    are drawn by request id from the mix's seed (0), so they hold every one of 6 or 7 equal weights
    by construction (all 6 by the 18th request, all 7 by the 9th)."""
    url = url_of(component_apps, version)
    written = tmp_path / "mix.yaml"
    qbench("init", url, "--mix", "-o", str(written))
    names = [entry["endpoint"]["api_name"] for entry in yaml.safe_load(written.read_text())["mix"]]
    assert {"analyze", "form", "respond", "chat"} <= set(names), names
    qbench("run", str(written), "--out", str(tmp_path / "run"), *SHORT,  # then their requests: 28
           "--set", "load.rate=14", "--set", "load.requests=28")
    assert len(read_records(tmp_path / "run")) == 28
    assert_all_ok(tmp_path / "run")
    assert {r.endpoint for r in read_records(tmp_path / "run")} == set(names)
