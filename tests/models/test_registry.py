"""The workload registry: every kind listed once, unknown kinds and params refused by name."""

from __future__ import annotations

import pytest

from reference_server.workloads import WorkloadConfigError, build_workload
from reference_server.workloads.registry import WORKLOADS, known_kinds

SYNTHETIC = ["echo", "sleep", "cpu", "stream", "tokens", "fail", "imageop"]


def test_known_kinds_are_sorted_and_complete() -> None:
    kinds = known_kinds()
    assert kinds == sorted(WORKLOADS) and len(kinds) == len(set(kinds))
    assert set(SYNTHETIC) | {"session_chat", "image-ideal", "text-generation", "embeddings"} <= set(kinds)


@pytest.mark.parametrize("kind", SYNTHETIC + ["session_chat", "image-ideal"])
def test_each_cheap_kind_builds_with_defaults_and_reports_its_kind(kind: str) -> None:
    workload = build_workload(kind)
    assert workload.kind == kind and workload.describe()["kind"] == kind
    assert workload.inputs and workload.outputs


def test_an_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(WorkloadConfigError) as caught:
        build_workload("sleeep", {})
    assert "unknown workload 'sleeep'" in str(caught.value) and ", ".join(known_kinds()) in str(caught.value)


def test_the_params_passed_in_are_not_changed() -> None:
    params = {"base_ms": 5, "jitter": {"sigma": 0.1, "seed": 2}}
    build_workload("sleep", params)
    assert params == {"base_ms": 5, "jitter": {"sigma": 0.1, "seed": 2}}
    assert build_workload("sleep", None).describe()["base_ms"] == 100.0
