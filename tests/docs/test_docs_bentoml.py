"""docs/bentoml.md's commands, run as written against BentoML 1.4.40 in its own virtualenv
(examples/bentoml/service.py served on a free port in place of 3000): the draft from its /schema.json,
and the capacity search at reduced size, its advice in BentoML's terms."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qbench.cli import app
from qbench.tune.servers.server_process import free_port
from tests.docs.test_docs_capacity import REDUCED_CAPACITY, doc_commands
from tests.run.test_frameworks_bentoml import bentoml_service

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "bentoml.md"
DOC_URL = "http://127.0.0.1:3000"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with bentoml_service(free_port(), tmp_path_factory.mktemp("bentoml")) as running:
        yield running


def qbench(line: str, url: str, extra: list[str]) -> str:
    args = [url if a == DOC_URL else a for a in shlex.split(line)]
    assert args[0] == "qbench", line
    out = CliRunner().invoke(app, [*args[1:], *extra])
    assert out.exit_code == 0, f"{line}\n{out.output}"
    return " ".join(out.output.split())


def test_the_service_and_the_init_command_run(url: str, tmp_path: Path) -> None:
    serve, init = doc_commands("## A scenario from the service", DOC)
    assert serve == "cd examples/bentoml && bentoml serve service:Batched --port 3000"  # the fixture's
    scenario = tmp_path / "s.yaml"
    said = qbench(init, url, ["-o", str(scenario)])
    assert "a BentoML server (service Batched: POST /predict (batchable))" in said
    drafted = yaml.safe_load(scenario.read_text())
    example = yaml.safe_load((ROOT / "examples" / "bentoml" / "predict.yaml").read_text())
    assert drafted["endpoint"] == example["endpoint"]  # the example is the draft, sized by hand
    assert drafted["payload"]["inputs"] == example["payload"]["inputs"]


def test_the_capacity_command_runs_and_advises_bentomls_own_cap(url: str, tmp_path: Path) -> None:
    (line,) = doc_commands("## How many users", DOC)
    reduced = [a for a in REDUCED_CAPACITY if a != "--no-overload"]
    said = qbench(line, url, ["--target", url, "--out", str(tmp_path), *reduced])
    assert "capacity:" in said and "req/s" in said, said
    assert "past it (x1.3)" in said, said
    assert 'traffic={"max_concurrency": N} in @bentoml.service' in said and "max_size=" not in said, said
