"""docs/capacity.md's measurement commands, run as written but at reduced size: the 4 x 100 ms reference
server and the real Gradio app it measures, `qbench capacity` on each (2 s confirmation, short probes)
and the 60 s `qbench run` that checks the answer (RUN_REQUESTS requests here)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.tune.servers.app_process import launch_command
from reference_server.settings import load_preset, parse_settings, read_settings_file
from reference_server.testing import serve_in_thread

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "capacity.md"
URL = "http://127.0.0.1:7860"
REDUCED_CAPACITY = ["--duration", "1.5", "--max-duration", "2", "--confirm-duration", "2",
                    "--max-probes", "4", "--tolerance", "25%", "--estimate-users", "16", "--no-overload"]
#: The run at the answer, sized in requests (its open-loop rate from the docs line, no duration).
RUN_REQUESTS = 10
REDUCED_RUN = ["--set", "load.duration=null", "--set", f"load.requests={RUN_REQUESTS}", "--no-live"]


def doc_commands(section: str, doc: Path = DOC) -> list[str]:
    """The command lines of the first sh block after `section` in `doc` (comments and `&` dropped)."""
    text = doc.read_text(encoding="utf-8").split(section, 1)[1]
    match = re.search(r"```sh\n(.*?)```", text, re.S)
    assert match, f"no sh block after {section!r}"
    lines = [line.split("#", 1)[0].strip().rstrip("&").strip() for line in match.group(1).splitlines()]
    return [line for line in lines if line]


def qbench(args: list[str], url: str, codes: tuple[int, ...] = (0,)) -> str:
    """Run a docs command; `codes`: the exit statuses that mean it ran (a run at a fixed rate may miss
    its SLO on a busy box: exit 3, its SLO table then says which bound failed)."""
    args = [url if a == URL else a for a in args]
    out = CliRunner().invoke(app, args)
    assert out.exit_code in codes, f"qbench {' '.join(args)}\n{out.output}"
    assert out.exit_code != 3 or "SLO violated" in out.output, out.output
    return out.output


@contextlib.contextmanager
def server_for(command: str, tmp_path: Path) -> Iterator[str]:
    """The server a docs line starts: the reference server (--config / --preset) or the Gradio app."""
    args = shlex.split(command)
    if args[:2] == ["qbench", "serve"]:
        settings = (load_preset(args[-1]) if args[2] == "--preset"
                    else parse_settings(read_settings_file(args[-1])))
        with serve_in_thread(settings) as server:
            yield server.url
        return
    assert args[0] == "python" and args[-2:] == ["--port", "7860"], command
    flags = " ".join(args[2:-2])  # the app's own, as the line gives them (--keep-history)
    with launch_command(f"{sys.executable} {args[1]} {flags} --port {{port}}", {}, work_dir=tmp_path / "app",
                        ready_timeout_s=120) as handle:
        yield handle.base_url


def test_the_measurement_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands = doc_commands("## Measured: the answer against the truth")
    assert len(commands) == 9 and commands[6].startswith("python examples/capacity/gradio_sleep_app.py")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for n in range(0, 9, 3):
        serve, capacity, run = commands[n:n + 3]
        assert shlex.split(capacity)[:2] == ["qbench", "capacity"] and "--set load.duration=60" in run
        with server_for(serve, tmp_path) as url:
            output = qbench(shlex.split(capacity)[1:] + REDUCED_CAPACITY, url)
            assert "held: for " in output or "NOT confirmed" in output
            run_args = [a.replace("<rate>", "10") for a in shlex.split(run)[1:]]
            qbench(run_args + REDUCED_RUN + ["--out", f"run{n}"], url, codes=(0, 3))
        assert json.loads((tmp_path / f"run{n}" / "summary.json").read_text())["completed_ok"] > 0
    names = sorted(f.name.split("-2")[0] for f in (tmp_path / "reports").glob("capacity-*"))
    assert names == ["capacity-gradio-sleep", "capacity-limit4", "capacity-sleep-rate"]


@pytest.mark.parametrize(("section", "serve_line"), [
    ("### A metastable Gradio chat app", "python examples/capacity/gradio_chat_app.py --port 7860"),
    ("### A chat app that ages with use",
     "python examples/capacity/gradio_chat_app.py --keep-history --port 7860"),
], ids=["metastable", "ageing"])
def test_the_chat_app_commands_run(section: str, serve_line: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat apps' measurements (a real gr.ChatInterface; `--keep-history` keeps every session's
    messages and ages with use): the app, `qbench capacity` at reduced size with its recheck, and the run
    at the rate."""
    serve, capacity, run = doc_commands(section)
    assert serve.startswith(serve_line)
    assert shlex.split(capacity)[:2] == ["qbench", "capacity"] and "--set load.duration=60" in run
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    with server_for(serve, tmp_path) as url:
        output = qbench(shlex.split(capacity)[1:] + REDUCED_CAPACITY, url)
        assert "held: for " in output or "NOT confirmed" in output
        assert "over the search: " in output  # the recheck's verdict, whichever it is
        run_args = [a.replace("<rate>", "5") for a in shlex.split(run)[1:]]
        qbench(run_args + REDUCED_RUN + ["--out", "chat"], url, codes=(0, 3))
    assert json.loads((tmp_path / "chat" / "summary.json").read_text())["completed_ok"] > 0
