"""bench/gradio_demos.py's own rules, without launching a demo: which failures cannot have 0 errors here
whatever qbench sends (listed apart from the goal, with the reason), where a demo starts, and the table
with both figures. The bench itself runs in tests/run/e2e/test_demo_apps.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "gradio_demos.py"


@pytest.fixture
def demos(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_gradio_demos", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses need it registered
    spec.loader.exec_module(module)
    return module


SOURCE = '''
import gradio as gr
calls = 0

def failure():
    raise gr.Error("This should fail!")

def second_call():
    global calls
    calls += 1
    if calls == 2:
        raise gr.Error("This is a gradio error")
    return calls

def checked(x):
    if x < 0:
        raise ValueError("x must not be negative")
    return x
'''


INVALID = "Invalid file type. Please upload a file that is one of these formats: "


def test_only_raises_that_no_argument_decides_are_deliberate(demos: ModuleType) -> None:
    assert demos.deliberate_raises(SOURCE) == ["This should fail!", "This is a gradio error"]


@pytest.mark.parametrize(("cause", "apart"), [
    ("server_error: This should fail!", "raises on purpose: the demo's code raises 'This should fail!'"),
    ("server_error: x must not be negative", ""),  # the input decides: it counts
    ("stream_broken: download http://x/a.jpg: ClientConnectorDNSError: [Name or service not known]",
     "needs the internet"),
    ("server_error: Executable 'ffmpeg' not found", "needs ffmpeg (not installed here)"),
    ("server_error: fraud_detector() missing 1 required positional argument: 'sensitivity'",
     "its function takes more or fewer arguments than the event's inputs"),
    ('http_4xx: GET http://h/file=/nowhere/cheetah.jpg: HTTP 403: {"detail":"File not allowed: '
     '/nowhere/cheetah.jpg."}', "returns or shows a file that does not exist (cheetah.jpg)"),
    ("server_error: 'NoneType' object is not subscriptable", ""),
    (f"server_error: {INVALID}['invalid file_type']", "declares file_types that no file has"),
    (f"server_error: {INVALID}['.pdf']", ""),
])
def test_a_failure_is_listed_apart_only_when_no_input_could_clear_it(demos: ModuleType, cause: str,
                                                                    apart: str) -> None:
    found = demos.apart_reason(demos.Row("d", "e", status="failed", sent=3, cause=cause), SOURCE)
    assert found.startswith(apart) if apart else found == ""


def test_an_interface_whose_function_does_not_take_its_inputs_is_found(demos: ModuleType) -> None:
    source = ("import gradio as gr\ndef f(table, categories, level):\n    return table\n"
              "demo = gr.Interface(f, [gr.CheckboxGroup(['a']), gr.Slider(1, 3)], 'json', api_name='fraud')\n"
              "ok = gr.Interface(f, [gr.Textbox(), gr.Textbox(), gr.Number()], 'text')\n")
    assert demos.mismatched_interfaces(source) == {"fraud"}
    row = demos.Row("d", "fraud", status="failed", sent=2, cause="server_error: argument of type 'float'")
    assert demos.apart_reason(row, source).startswith("its function takes more or fewer arguments")


def test_an_endpoint_that_reaches_for_the_internet_in_any_of_its_errors_needs_it(demos: ModuleType) -> None:
    row = demos.Row("d", "bot", status="failed", sent=9, cause="server_error: Could not postprocess output",
                    samples={"server_error": "Could not postprocess output",
                             "stream_broken": "download https://h/x.png: [Name or service not known]"})
    assert demos.apart_reason(row, "") == "needs the internet"


def test_a_demo_starts_where_its_relative_file_names_are_found(demos: ModuleType, tmp_path: Path) -> None:
    space = tmp_path / "demo" / "space"
    space.mkdir(parents=True)
    (space / "run.py").write_text('def f():\n    return "sax.mp3"\n')
    (space / "sax.mp3").write_bytes(b"")
    assert demos.launch_dir(space) == space  # as a Space runs it
    repo = tmp_path / "demo" / "repo"
    repo.mkdir()
    (repo / "run.py").write_text('gr.Image("demo/repo/cat.png")\n')
    (repo / "cat.png").write_bytes(b"")
    assert demos.launch_dir(repo) == tmp_path  # as Gradio's CI runs it: from the repository's root


def test_the_table_gives_both_figures_and_the_merge_keeps_demos_not_rerun(demos: ModuleType,
                                                                         tmp_path: Path) -> None:
    row = demos.Row
    rows = [row("a", "ok1", sent=2, ok=2),
            row("a", "bad", status="failed", sent=2, cause="server_error: boom"),
            row("b", "raises", status="failed", sent=2, cause="server_error: This should fail!",
                apart="raises on purpose"), row("c", status="skipped", cause="needs the package 'cv2'")]
    text = demos.table(rows)
    assert text.startswith("1 of 3 endpoints (33.3%) of 2 demos ran clean (0 errors, at least one request "
                           "completed)")
    assert "Leaving out the 1 endpoint(s) that cannot have 0 errors" in text and "1 of 2 (50.0%)" in text
    assert "| b | /raises | 2 | 0 | raises on purpose | failed: server_error: This should fail! |" in text
    old = tmp_path / "old.json"
    old.write_text(json.dumps([r.__dict__ for r in rows]))
    out, empty = tmp_path / "out", tmp_path / "no-demos"
    empty.mkdir()
    assert demos.main(["--demos", str(empty), "--merge", str(old), "--out", str(out)]) == 1  # 1 of 2 counted
    merged = json.loads((out / "results.json").read_text())
    assert [r["demo"] for r in merged] == ["a", "a", "b", "c"]


def test_clean_needs_a_completed_request(demos: ModuleType) -> None:
    """0 errors with nothing completed (every event still running at the run's end) is not clean: it
    fails with its cause, and a row of an older results.json saying "ok" with 0 completed is not counted."""
    row = demos.Row
    slow = demos.settle(row("a", "slow", sent=2, ok=0, still_running=2), demos.load_size(2.0, None))
    assert (slow.status, slow.cause) == ("failed", "no request completed in the 2 s run (2 still running at "
                                         "its end)")
    by_count = demos.settle(row("a", "slow", sent=2, ok=0, still_running=2), demos.load_size(2.0, 4))
    assert by_count.cause == "no request completed in the run of 4 requests (2 still running at its end)"
    done = demos.settle(row("a", "fine", sent=2, ok=1, still_running=1), demos.load_size(2.0, None))
    assert done.status == "ok"
    old = row("b", "old", status="ok", sent=3, ok=0, still_running=3)
    ran, clean, apart = demos.tally([done, old])
    assert (len(ran), clean, apart) == (2, [done], [])
    text = demos.table([done, old])
    assert text.startswith("1 of 2 endpoints (50.0%)")
    assert "| b | /old | 3 | 0 | no request completed |" in text
