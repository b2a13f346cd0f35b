"""Output folders (one convention for runs, sweeps and capacity, never outside the root) and the one
JSON writer (atomic, masked by the Secrets it was given)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from qbench.errors import QbenchError
from qbench.run.pipeline import run_scenario
from qbench.run.results.files import Writer, new_folder, remove_if_empty, stamp
from qbench.run.scenario.credentials import MASK, Auth, Secrets, resolve
from tests.run.conftest import scenario

HOSTILE = [("a/../../x", "a-x"), ("../../etc", "etc"), ("a b", "a-b"), ("..", None), ("/", None)]
WHEN = datetime(2026, 11, 23, 10, 15, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("kind", ["run", "sweep", "capacity"])
@pytest.mark.parametrize(("name", "slug"), HOSTILE)
def test_folders_are_named_one_way_and_stay_under_the_root(tmp_path: Path, kind: str, name: str,
                                                           slug: str | None) -> None:
    root = tmp_path / "reports"
    path = new_folder(kind, name, root, when=WHEN)  # type: ignore[arg-type]
    assert path.parent == root and path.is_dir()
    assert path.name == f"{kind}-{slug or kind}-20261123-101500"


def test_two_started_in_the_same_second_get_their_own_folders(tmp_path: Path) -> None:
    paths = [new_folder("run", "image", tmp_path, when=WHEN) for _ in range(3)]
    assert [p.name for p in paths] == ["run-image-20261123-101500", "run-image-20261123-101500-2",
                                       "run-image-20261123-101500-3"]


def test_the_stamp_is_utc() -> None:
    local = datetime(2026, 11, 23, 10, 15, 0).astimezone()  # this machine's zone, whatever it is
    assert stamp(local) == local.astimezone(timezone.utc).strftime("%Y%m%d-%H%M%S")
    assert re.fullmatch(r"\d{8}-\d{6}", stamp())


def test_remove_if_empty_keeps_a_folder_with_files(tmp_path: Path) -> None:
    empty, full = new_folder("run", "a", tmp_path), new_folder("run", "b", tmp_path)
    (full / "run.json").write_text("{}")
    remove_if_empty(empty)
    remove_if_empty(full)
    assert not empty.exists() and (full / "run.json").exists()


def test_the_writer_masks_its_secrets_and_replaces_files_atomically(tmp_path: Path) -> None:
    secrets = Secrets().with_values("hunter2", "ab").with_url("http://u:p%40ss@h/x?api_key=k3y&q=1")
    writer = Writer(secrets)
    path = tmp_path / "out.json"
    path.write_text("old")
    writer.json(path, {"password": "hunter2", "url": "http://u:p%40ss@h/x?api_key=k3y&q=1", "short": "ab",
                       "when": WHEN})
    text = path.read_text()
    assert "hunter2" not in text and "p%40ss" not in text and "k3y" not in text
    assert json.loads(text)["short"] == "ab"  # too short to scrub from free text
    assert json.loads(text)["when"] == str(WHEN)  # non-JSON values as str, as before
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no .tmp left behind
    assert "hunter2" not in repr(secrets) and writer.mask("x hunter2 y") == f"x {MASK} y"


def test_credentials_hand_their_secrets_over_as_data(tmp_path: Path) -> None:
    auth = Auth.model_validate({"login": {"username": "u", "password": "pw-1"}, "bearer": "${TOK}",
                                "headers": {"X-Api-Key": "key-1", "Accept": "text/plain"},
                                "cookies": {"s": "cookie-1"}, "secret_headers": ["X-Tenant"]})
    values = resolve(auth, environ={"TOK": "tok-1"}).secrets.values
    assert {"pw-1", "tok-1", "Bearer tok-1", "key-1", "cookie-1"} <= values
    assert "text/plain" not in values


def test_a_run_named_outside_reports_stays_under_it(http_echo: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = scenario(name="a/../../x", protocol="http", endpoint={"path": "/echo", "body": {"q": "$0"}},
                    payload={"inputs": [{"text": {"words": [1, 2]}}]}, load={"burst": 2, "timeout": 5})
    result = run_scenario(spec, target=http_echo, live=False)
    assert result.run_dir.parent == Path("reports") and result.run_dir.name.startswith("run-a-x-")
    assert (tmp_path / result.run_dir / "summary.json").is_file()
    with pytest.raises(QbenchError) as failed:  # nothing listens: the reserved folder goes again
        run_scenario(spec, target="http://u:pw-secret-9@127.0.0.1:9/?token=tok-secret-9", live=False)
    assert [p.name for p in (tmp_path / "reports").iterdir()] == [result.run_dir.name]
    assert "cannot connect" in str(failed.value) and "secret-9" not in str(failed.value)  # the CLI prints it


def test_sweep_and_capacity_named_outside_reports_stay_under_it(tmp_path: Path) -> None:
    from qbench.tune.capacity.command import capacity_config
    from qbench.tune.sweep.config import SweepOptions, build_config

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "a/../../x", "target": "http://127.0.0.1:9",
                                    "endpoint": {"api_name": "work"}, "load": {"rate": 2, "duration": 1},
                                    "slo": {"p95_latency_s": 1}}))
    root = tmp_path / "deep" / "reports"
    capacity = capacity_config(path, out_root=root)
    sweep = build_config(SweepOptions(str(path), grid=["rate=1,2"], target="http://127.0.0.1:9",
                                      out_root=str(root)))
    assert capacity.out_dir.parent == root and capacity.out_dir.name.startswith("capacity-a-x-")
    assert sweep.sweep_dir.parent == root and sweep.sweep_dir.name.startswith("sweep-a-x-")
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_dir()) == sorted(
        ["deep", "reports", capacity.out_dir.name, sweep.sweep_dir.name])


def test_sweep_and_capacity_writers_know_their_secrets(tmp_path: Path) -> None:
    """What they write and print: the target's credentials; a sweep's also its launched servers' own."""
    from qbench.tune.capacity.command import capacity_config
    from qbench.tune.sweep.config import SweepOptions, build_config

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "endpoint": {"api_name": "work"},
                                    "load": {"rate": 2, "duration": 1}, "slo": {"p95_latency_s": 1}}))
    target = "http://u:pw-target-1@127.0.0.1:9/?token=tok-target-1"
    capacity = capacity_config(path, target=target, out_root=tmp_path)
    assert capacity.writer.mask(target) == "http://u:***@127.0.0.1:9/?token=***"
    sweep = build_config(SweepOptions(str(path), grid=["rate=1,2"], target=target, out_root=str(tmp_path)))
    assert sweep.writer.mask(target) == "http://u:***@127.0.0.1:9/?token=***"
    server = {"auth": {"users": {"dora": "pw-server-1"}, "tokens": ["tok-server-1"]}}
    launched = replace(sweep, base_settings=server)
    assert launched.writer.mask("pw-server-1 tok-server-1") == "*** ***"


def test_a_command_that_fails_leaves_no_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from qbench.cli import app

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["run", "--api", "classify"])  # no scenario, no target
    assert out.exit_code == 2
    out = CliRunner().invoke(app, ["run", "--target", "http://127.0.0.1:9", "--no-live"])  # nothing listens
    assert out.exit_code == 2
    assert not any((tmp_path / "reports").iterdir()) if (tmp_path / "reports").exists() else True
