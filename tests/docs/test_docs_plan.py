"""docs/capacity-plan.md's commands, run as written but at reduced size: one replica's capacity, the plan
for 1,000 users from it, and the capacity of 3 replicas behind nginx (`qbench serve --replicas 3` is
`reference_replicas(settings, 3)`; skipped without nginx). The page's Gradio replicas behind
`qbench balance` run in tests/tune/servers/test_balancer.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.tune.servers.balancer import nginx_binary, reference_replicas
from reference_server.settings import parse_settings, read_settings_file
from reference_server.testing import serve_in_thread
from tests.docs.test_docs_capacity import REDUCED_CAPACITY
from tests.docs.test_docs_capacity import doc_commands as capacity_doc_commands

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "capacity-plan.md"
URL = "http://127.0.0.1:7860"
def doc_commands(section: str) -> list[str]:
    """The command lines of the first sh block after `section` (comments and `&` dropped)."""
    return capacity_doc_commands(section, DOC)


def qbench(args: list[str], replace: dict[str, str]) -> str:
    args = [replace.get(a, a) for a in args]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, f"qbench {' '.join(args)}\n{out.output}"
    return " ".join(out.output.split())


def test_the_plan_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve, capacity, plan = doc_commands("## A plan for 1,000 users")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    config = shlex.split(serve)[shlex.split(serve).index("--config") + 1]
    with serve_in_thread(parse_settings(read_settings_file(ROOT / config))) as server:
        qbench(shlex.split(capacity)[1:] + REDUCED_CAPACITY, {URL: server.url})
    (folder,) = (tmp_path / "reports").glob("capacity-replica-*")
    output = qbench(shlex.split(plan)[1:], {"reports/capacity-replica-<stamp>": str(folder)})
    assert "peak:" in output and "replicas:" in output and "cost: " in output and "fleet:" in output
    written = json.loads((folder / "plan.json").read_text())
    assert written["traffic"]["users"] == 1000 and written["price_per_hour"] == 1.8


@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (apt-get install nginx-light)")
def test_the_replicas_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve, capacity = doc_commands("## Proven on replicas behind nginx")
    args = shlex.split(serve)
    assert args[:2] == ["qbench", "serve"] and args[args.index("--replicas") + 1] == "3"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    settings = parse_settings(read_settings_file(ROOT / args[args.index("--config") + 1]))
    with reference_replicas(settings, 3, "session") as front:
        output = qbench(shlex.split(capacity)[1:] + REDUCED_CAPACITY, {URL: front.url})
    assert "capacity:" in output, output
