"""/config and /info bodies built directly: component ids, dependencies, versions, visibility."""

from __future__ import annotations

from typing import Any

import pytest

from reference_server.http.api_config import VERSIONS, api_prefix, build_config, build_info
from reference_server.http.server_state import build_functions
from reference_server.settings import ServerSettings, synthetic_settings

FUNCTIONS: list[dict[str, Any]] = [
    {"api_name": "echo", "workload": "echo"},
    {"api_name": "img", "workload": "imageop", "batch": True, "max_batch_size": 8},
    {"api_name": "gen", "workload": "stream", "api_visibility": "undocumented"},
    {"api_name": "secret", "workload": "echo", "api_visibility": "private", "queue": False},
]


def settings(**fields: Any) -> ServerSettings:
    return synthetic_settings(functions=FUNCTIONS, **fields)


def config(**fields: Any) -> dict[str, Any]:
    s = settings(**fields)
    return build_config(s, build_functions(s))


@pytest.mark.parametrize(("gradio", "prefix"), [(3, ""), (4, ""), (5, "/gradio_api"), (6, "/gradio_api")])
def test_api_prefix_from_gradio_5(gradio: int, prefix: str) -> None:
    assert api_prefix(gradio) == prefix


def test_components_are_numbered_in_order_and_wired_to_their_dependency() -> None:
    body = config()
    assert [c["id"] for c in body["components"]] == list(range(1, 10))
    assert body["layout"]["children"] == [{"id": i} for i in range(1, 10)]
    deps = body["dependencies"]
    assert [(d["id"], d["api_name"], d["inputs"], d["outputs"]) for d in deps] == [
        (0, "echo", [1], [2]),
        (1, "img", [3], [4, 5]),  # imageop: image in; image and json out
        (2, "gen", [6], [7]),
        (3, "secret", [8], [9]),
    ]
    assert [c["type"] for c in body["components"][2:5]] == ["image", "image", "json"]


def test_dependencies_carry_each_functions_queue_knobs() -> None:
    deps = config()["dependencies"]
    assert (deps[1]["batch"], deps[1]["max_batch_size"]) == (True, 8)
    assert [d["types"]["generator"] for d in deps] == [False, False, True, False]
    assert [d["queue"] for d in deps] == [True, True, True, False]
    assert [d["api_visibility"] for d in deps] == ["public", "public", "undocumented", "private"]


@pytest.mark.parametrize("gradio", [4, 5, 6])
def test_config_version_is_the_emulated_release(gradio: int) -> None:
    body = config(gradio=gradio)
    assert body["version"] == VERSIONS[gradio]
    assert ("api_prefix" in body) == (gradio >= 5)
    assert body["protocol"] == "sse_v3" and len(body["dependencies"]) == 4


def test_gradio3_config_has_no_protocol_and_its_own_version() -> None:
    body = config(gradio=3, title="three", show_error=True)
    assert body["version"] == VERSIONS[3] and "protocol" not in body and "api_prefix" not in body
    assert (body["title"], body["show_error"]) == ("three", True)
    assert len(body["dependencies"]) == 4 and len(body["components"]) == 9


def test_config_repeats_the_server_knobs() -> None:
    body = config(title="mine", show_error=True, max_file_size=1000)
    assert (body["title"], body["show_error"], body["max_file_size"]) == ("mine", True, 1000)


def test_info_lists_public_functions_and_undocumented_ones_on_request() -> None:
    functions = build_functions(settings())
    assert set(build_info(functions)["named_endpoints"]) == {"/echo", "/img"}
    every = build_info(functions, all_endpoints=True)
    assert set(every["named_endpoints"]) == {"/echo", "/img", "/gen"}  # private stays private
    assert every["unnamed_endpoints"] == {}
    img = every["named_endpoints"]["/img"]
    assert (len(img["parameters"]), len(img["returns"]), img["api_visibility"]) == (1, 2, "public")
