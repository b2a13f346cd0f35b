"""ParamReader: typed keys with defaults, errors naming key, value and expectation, unknown keys refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reference_server.workloads.base import WorkloadConfigError
from reference_server.workloads.models.params import CommonParams, LabelParams, ParamReader


def test_an_empty_mapping_gives_the_documented_defaults() -> None:
    reader = ParamReader("text-classification", {})
    assert reader.common() == CommonParams()
    assert reader.labels(default_count=3) == LabelParams(top_k=5, num_labels=3, labels=None)
    reader.finish()


def test_values_are_read_and_labels_set_the_class_count() -> None:
    reader = ParamReader("k", {"model": "org/m", "size": "tiny", "config": {"num_hidden_layers": 1},
                               "dtype": "bfloat16", "threads": 2, "seed": 9, "compile": True,
                               "labels": ["cat", "dog", "eel"], "top_k": 2})
    common, labels = reader.common(), reader.labels(default_count=2)
    assert common == CommonParams("org/m", "tiny", {"num_hidden_layers": 1}, "bfloat16", 2, 9, True)
    assert labels.label_count() == 3 and labels.id2label() == {0: "cat", 1: "dog", 2: "eel"}
    assert LabelParams(num_labels=4).label_count() == 4 and LabelParams().id2label() is None
    reader.finish()


def test_compile_names_its_backend_or_takes_inductor() -> None:
    assert ParamReader("k", {"compile": True}).common().compile_backend == "inductor"
    common = ParamReader("k", {"compile": "aot_eager"}).common()
    assert (common.compile, common.compile_backend) == (True, "aot_eager")
    assert ParamReader("k", {"compile": False}).common().compile is False


READS: list[tuple[str, Any, Callable[[ParamReader], Any], str]] = [
    ("model", "  ", lambda r: r.opt_str("model"), "a non-empty string or null"),
    ("model", 3, lambda r: r.opt_str("model"), "a non-empty string or null"),
    ("size", "huge", lambda r: r.choice("size", ("base", "tiny"), "base"), "one of base, tiny"),
    ("seed", -1, lambda r: r.integer("seed", 0, 0), "an integer >= 0"),
    ("seed", 1.5, lambda r: r.integer("seed", 0, 0), "an integer >= 0"),
    ("seed", True, lambda r: r.integer("seed", 0, 0), "an integer >= 0"),  # a bool is not an integer
    ("threads", 0, lambda r: r.opt_integer("threads", 1), "an integer >= 1"),
    ("temperature", -0.1, lambda r: r.number("temperature", 1.0, 0.0), "a number >= 0.0"),
    ("temperature", False, lambda r: r.number("temperature", 1.0, 0.0), "a number >= 0.0"),
    ("temperature", float("nan"), lambda r: r.number("temperature", 1.0, 0.0), "a number >= 0.0"),
    ("compile", "yes", lambda r: r.flag("compile", False), "true or false"),
    ("compile", "fast", lambda r: r.compile_choice(),
     "true, false or a torch.compile backend (inductor, aot_eager, eager, cudagraphs)"),
    ("config", [1], lambda r: r.mapping("config"), "a mapping of transformers config keys to values"),
    ("labels", [], lambda r: r.str_list("labels"), "a non-empty list of label names"),
    ("labels", ["a", ""], lambda r: r.str_list("labels"), "a non-empty list of label names"),
]


@pytest.mark.parametrize(("key", "value", "read", "expected"), READS)
def test_a_bad_value_names_workload_key_value_and_expectation(
    key: str, value: Any, read: Callable[[ParamReader], Any], expected: str
) -> None:
    with pytest.raises(WorkloadConfigError) as caught:
        read(ParamReader("kind-x", {key: value}))
    assert str(caught.value) == f"workload 'kind-x': params.{key} = {value!r}: expected {expected}"


def test_numbers_accept_ints_and_null_optionals_read_as_none() -> None:
    reader = ParamReader("k", {"temperature": 2, "threads": None, "labels": None, "config": None})
    assert reader.number("temperature", 1.0, 0.0) == 2.0
    assert reader.opt_integer("threads", 1) is None and reader.str_list("labels") is None
    assert reader.mapping("config") == {}
    reader.finish()  # keys present with null values count as read


def test_unknown_keys_are_refused_with_what_was_expected() -> None:
    reader = ParamReader("embeddings", {"sise": "tiny", "seed": 1, "zzz": 0})
    reader.common()
    with pytest.raises(WorkloadConfigError) as caught:
        reader.finish()
    message = str(caught.value)
    assert message.startswith("workload 'embeddings': unknown params sise, zzz; expected some of: compile, ")
    assert "seed" in message and "size" in message


def test_the_callers_mapping_is_not_changed() -> None:
    params = {"config": {"a": 1}}
    ParamReader("k", params).mapping("config")["b"] = 2
    assert params == {"config": {"a": 1}}
