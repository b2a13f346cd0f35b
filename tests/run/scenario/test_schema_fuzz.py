"""Fuzzed scenario files always end in a clear ScenarioError (CLI: exit code 2 and `error: ...`), never in
a traceback: random YAML documents, and a valid scenario with random values at random keys (hypothesis).

Numbers are drawn small (a real load: fast) or huge (must be refused before anything is allocated)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from qbench.cli import app
from qbench.errors import ScenarioError
from qbench.run.pipeline import parse_set_options
from qbench.run.scenario.payloads import PayloadGenerator
from qbench.run.scenario.schedule import OpenPlan, plan
from qbench.run.scenario.schema import load_scenario, parse_scenario

EXAMPLES = int(os.environ.get("QBENCH_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once

BASE: dict[str, Any] = {
    "name": "fuzz",
    "target": UNREACHABLE,
    "protocol": "gradio",
    "endpoint": {"api_name": "predict"},
    "payload": {"seed": 0, "variants": 2, "inputs": [{"text": {"words": [2, 3]}}]},
    "load": {"rate": 5, "duration": 1, "timeout": 5},
    "slo": {"p95_latency_s": 1.0},
}
# Every key of the schema, so mutations land where the validators are (plus some unknown ones).
KEYS = [
    "name", "description", "target", "protocol", "sweep", "unknown",
    "endpoint.api_name", "endpoint.fn_index", "endpoint.method", "endpoint.path", "endpoint.body",
    "endpoint.headers", "endpoint.headers.X-Test", "endpoint.extra",
    "payload.seed", "payload.variants", "payload.inputs", "payload.inputs.0", "payload.inputs.0.text",
    "payload.inputs.0.text.words", "payload.inputs.0.text.file", "payload.inputs.0.image",
    "payload.inputs.0.image.width", "payload.inputs.0.image.format", "payload.inputs.0.audio",
    "payload.inputs.0.audio.seconds", "payload.inputs.0.number", "payload.inputs.0.number.min",
    "payload.inputs.0.number.max", "payload.inputs.0.number.integer", "payload.inputs.0.json",
    "payload.inputs.0.files", "payload.inputs.0.files.dir", "payload.inputs.0.files.pattern",
    "payload.inputs.0.value", "payload.inputs.1",
    "load", "load.rate", "load.burst", "load.interval", "load.users", "load.stages", "load.stages.0",
    "load.stages.0.rate", "load.stages.0.to", "load.stages.0.duration", "load.arrival", "load.think_time",
    "load.think", "load.ramp_up", "load.duration", "load.requests", "load.warmup", "load.timeout",
    "load.drain", "load.sessions", "load.max_in_flight", "load.max_connections", "load.connect_timeout",
    "load.processes", "slo", "slo.p95_latency_s", "slo.error_rate", "slo.min_goodput", "slo.p42_latency_s",
]

huge = st.integers(2**31, 2**80) | st.integers(-(2**80), -(2**31)) | st.sampled_from([1e300, 1e-300])
numbers = st.integers(-3, 100) | huge | st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(max_size=20) | st.sampled_from(["", "\x00", "a\x00b", "../../x", "/etc/passwd", "*", "/"])
leaves = st.none() | st.booleans() | numbers | texts
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def set_key(doc: dict[str, Any], dotted: str, value: Any) -> None:
    node: Any = doc
    *parents, leaf = dotted.split(".")
    for part in parents:
        key: Any = int(part) if part.isdigit() and isinstance(node, list) else part
        if isinstance(node, list):
            while len(node) <= key:
                node.append({})
            node = node[key]
        elif isinstance(node, dict):
            node = node.setdefault(key, {})
        else:
            return
    if isinstance(node, list) and leaf.isdigit():
        while len(node) <= int(leaf):
            node.append(None)
        node[int(leaf)] = value
    elif isinstance(node, dict):
        node[leaf] = value


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """The base scenario with 1-2 keys set to random values (or deleted)."""
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from(KEYS))
        if draw(st.integers(0, 5)) == 0:
            parent, _, leaf = key.rpartition(".")
            node: Any = doc
            for part in parent.split(".") if parent else []:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(leaf, None)
        else:
            set_key(doc, key, draw(numbers | texts | values))  # (plain numbers and texts twice as often)
    return doc


documents = mutated() | st.dictionaries(texts, values, max_size=4) | values
raw_files = st.binary(max_size=200) | st.sampled_from([b"[" * 3000, b"{a: [1, 2", b"\xff\xfe\x00x", b"a: *b"])


def write_doc(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "fuzz.yaml"
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return path


def prepare(path: Path) -> None:
    """What `qbench run` does before it contacts the target: load, schedule, generate the payloads."""
    scenario = load_scenario(path)
    plan(scenario.load, seed=scenario.payload.seed)
    PayloadGenerator(scenario.payload).prepare(scenario.payload.variants)


@FUZZ
@given(doc=documents | raw_files)
def test_fuzzed_scenarios_load_or_fail_with_a_scenario_error(tmp_path: Path, doc: Any) -> None:
    try:
        prepare(write_doc(tmp_path, doc))
        event("valid")
    except ScenarioError as exc:
        event("ScenarioError")
        assert str(exc).strip()


as_yaml = values.map(lambda v: yaml.safe_dump(v).strip())
set_items = st.builds("{}={}".format, st.sampled_from(KEYS) | st.text(max_size=10), as_yaml)
set_items |= st.text(max_size=20)


@FUZZ
@given(doc=documents | raw_files, sets=st.lists(set_items, max_size=2), target=st.booleans())
def test_cli_run_ends_with_exit_code_2_and_a_message(
    tmp_path: Path, doc: Any, sets: list[str], target: bool
) -> None:
    path = write_doc(tmp_path, doc)
    args = ["run", str(path), "--no-live", "--out", str(tmp_path / "run")]
    args += ["--target", UNREACHABLE] if target else []
    for item in sets:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.exception, result.output)
    assert "error: " in result.output
    event("target refused" if "127.0.0.1:9" in result.output else "scenario refused")


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("load", {"burst": 2**40}, "would schedule about 1.1e\\+12 requests"),
        ("load", {"burst": 10, "interval": 1e-9, "duration": 10}, "would schedule"),
        ("load", {"users": 2**40, "duration": 1}, "users"),
        ("load", {"rate": 1e300, "duration": 1}, "would schedule"),
        ("load", {"rate": 1, "duration": float("inf")}, "finite number"),
        ("load", {"users": 2, "duration": 1, "ramp_up": float("nan")}, "finite number"),
        ("payload.variants", 2**31, "less than or equal to 100000"),
        ("payload.seed", -1, "greater than or equal to 0"),
        ("payload.inputs.0", {"text": {"words": [1, 2**40]}}, "max <= 100,000"),
        ("payload.inputs.0", {"text": {"file": "a\x00b"}}, "embedded null byte"),
        ("payload.inputs.0", {"files": {"dir": ".", "pattern": ""}}, "expected a relative glob"),
        ("payload.inputs.0", {"files": {"dir": ".", "pattern": "/etc/*"}}, "expected a relative glob"),
        ("payload.inputs.0", {"number": {"min": 5, "max": 1}}, "expected min <= max"),
        ("payload.inputs.0", {"number": {"min": -1e308, "max": 1e308}}, "a finite range"),
        ("payload.inputs.0", {"number": {"min": 0, "max": 1e300, "integer": True}}, "within"),
    ],
)
def test_values_that_used_to_raise_anything_but_a_scenario_error(
    tmp_path: Path, key: str, value: Any, expect: str
) -> None:
    doc = copy.deepcopy(BASE)
    set_key(doc, key, value)
    with pytest.raises(ScenarioError, match=expect):
        prepare(write_doc(tmp_path, doc))


def test_a_huge_poisson_run_capped_by_requests_schedules_only_those() -> None:
    doc = {**BASE, "load": {"rate": 1, "duration": 1e300, "requests": 5, "arrival": "poisson"}}
    scheduled = plan(parse_scenario(doc).load)
    assert isinstance(scheduled, OpenPlan) and len(scheduled) == 5


@pytest.mark.parametrize("text", [b"\x80", b"[" * 3000, b"a: 2024-02-30", b"a: \x1f"])
def test_unreadable_yaml_is_a_scenario_error(tmp_path: Path, text: bytes) -> None:
    with pytest.raises(ScenarioError, match="not UTF-8|not valid YAML"):
        load_scenario(write_doc(tmp_path, text))


def test_a_set_option_that_is_not_yaml_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="--set 'load.rate=\\x1f': the value is not valid YAML"):
        parse_set_options(["load.rate=\x1f"])
