"""docs/auth.md's commands (apps behind a login), run as written at reduced size (1 s runs): the
`qbench serve` line's flags give the reference server in a thread, each `qbench run` line runs
against it with its environment assignments set."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qbench.cli import app
from reference_server.launch import ServeOptions, build_parser, settings_from_options
from reference_server.testing import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "auth.md"
REDUCED = ["--set", "load.duration=1", "--no-live"]


def commands() -> list[tuple[dict[str, str], list[str]]]:
    """(environment assignments, qbench arguments) per command line of the section's sh block."""
    text = DOC.read_text(encoding="utf-8")
    (block,) = re.findall(r"```sh\n(.*?)```", text, re.S)
    found = []
    for line in block.splitlines():
        words = shlex.split(line.split(" #", 1)[0].rstrip().rstrip("&"))
        env = {}
        while words and re.match(r"^[A-Z_]+=", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        assert words[0] == "qbench", line
        found.append((env, words[1:]))
    return found


def test_the_readme_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (_, serve), *runs = commands()
    assert serve[0] == "serve" and len(runs) == 3 and all(r[0] == "run" for _, r in runs)
    options = vars(build_parser().parse_args(serve[1:]))
    monkeypatch.chdir(ROOT)
    with serve_in_thread(settings_from_options(ServeOptions(**options))) as server:
        for k, (env, args) in enumerate(runs):
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            out_dir = tmp_path / f"r{k}"
            full = [*args, "--target", server.url, "--out", str(out_dir), *REDUCED]
            result = CliRunner().invoke(app, full)
            assert result.exit_code in (0, 3), (
                f"qbench {' '.join(full)}\n{result.output}"
            )  # 3: an SLO on a busy host
            assert ("login: 4 login(s), 0 re-login(s)" in result.output) is (
                "--bearer-env" not in args
            )  # 4 users
            summary = json.loads((out_dir / "summary.json").read_text())
            assert summary["requests"] > 0 and summary["completed_ok"] == summary["requests"]
            for name in env:
                monkeypatch.delenv(name)
        bare = [
            "run",
            "scenarios/login.yaml",
            "--target",
            server.url,
            "--set",
            "auth.login=null",
            "--no-live",
        ]
        refused = CliRunner().invoke(app, bare)
        assert refused.exit_code == 2 and "this app asks for a login: set auth.login" in refused.output
