"""Grid expansion, linked variables and the safe expression language."""

from __future__ import annotations

import pytest

from qbench.errors import ScenarioError
from qbench.tune.knobs.grid import Expr, build_grid, parse_axis, parse_value, point_id


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4), ("0.5", 0.5), ("true", True), ("False", False), ("none", "none"), ("abc", "abc")],
)
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_parse_axis() -> None:
    assert parse_axis("concurrency_limit=1,2, 4") == ("concurrency_limit", [1, 2, 4])


@pytest.mark.parametrize("option", ["concurrency_limit", "=1,2", "bogus_knob=1,2", "max_threads="])
def test_parse_axis_errors(option: str) -> None:
    with pytest.raises(ScenarioError, match="--grid"):
        parse_axis(option)


def test_cartesian_product_in_axis_order_with_links() -> None:
    grid = build_grid(
        ["concurrency_limit=1,2", "max_batch_size=1,4", "max_threads=8"],
        ["users=2*concurrency_limit*max_batch_size"],
    )
    points = grid.points()
    assert grid.size == len(points) == 4
    assert [p.knobs for p in points] == [
        {"concurrency_limit": 1, "max_batch_size": 1, "max_threads": 8, "users": 2},
        {"concurrency_limit": 1, "max_batch_size": 4, "max_threads": 8, "users": 8},
        {"concurrency_limit": 2, "max_batch_size": 1, "max_threads": 8, "users": 4},
        {"concurrency_limit": 2, "max_batch_size": 4, "max_threads": 8, "users": 16},
    ]
    assert points[3].point_id == "c2-b4-t8-u16"
    assert points[3].server_knobs() == {"concurrency_limit": 2, "max_batch_size": 4, "max_threads": 8}
    assert points[3].client_overrides() == {"load.users": 16}
    assert points[3].coords == (1, 1, 0)


def test_grid_from_scenario_mapping() -> None:
    grid = build_grid({"max_size": [4, "none"], "rate": [2.5]}, {"load.duration": "max(rate, 3)"})
    assert [p.knobs for p in grid.points()] == [
        {"max_size": 4, "rate": 2.5, "load.duration": 3},
        {"max_size": "none", "rate": 2.5, "load.duration": 3},
    ]
    assert grid.points()[0].client_overrides() == {"load.rate": 2.5, "load.duration": 3}


@pytest.mark.parametrize(
    ("source", "knobs", "value"),
    [
        ("2*c*b", {"c": 2, "b": 4}, 16),
        ("c + b / 2", {"c": 1, "b": 3}, 2.5),
        ("-c ** 2", {"c": 3}, -9),
        ("max(1, c // 2)", {"c": 1}, 1),
        ("ceil(c / 3) + floor(1.9) + round(2.4) + int(3.7) + min(c, 9) % 4", {"c": 7}, 3 + 1 + 2 + 3 + 3),
        ("(c + 1) * 2", {"c": 1}, 4),
    ],
)
def test_expressions(source: str, knobs: dict[str, int], value: float) -> None:
    assert Expr.parse(source).evaluate(knobs) == value


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('true')",
        "c.real",
        "open('x')",
        "[c]",
        "'a' * 3",
        "c if c else 1",
        "lambda: 1",
        "c < 2",
        "max(c, key=abs)",
        "c &",
        "True + 1",
    ],
)
def test_unsafe_or_invalid_expressions_are_refused(source: str) -> None:
    with pytest.raises(ScenarioError):
        Expr.parse(source)


def test_link_to_unknown_knob_is_refused() -> None:
    with pytest.raises(ScenarioError, match="not grid axes"):
        build_grid(["concurrency_limit=1"], ["users=2*max_batch_size"])


def test_link_cannot_shadow_axis() -> None:
    with pytest.raises(ScenarioError, match="both"):
        build_grid(["users=1,2"], ["users=2"])


def test_point_id_is_filesystem_safe() -> None:
    assert point_id({"rate": 2.5, "load.arrival": "poisson", "concurrency_id": "a/b"}) == (
        "r2.5-load_arrivalpoisson-ga_b"
    )


def test_edge_notes_flag_a_winner_on_the_grid_edge() -> None:
    grid = build_grid(["concurrency_limit=1,2,4", "max_batch_size=1,4", "max_threads=40"])
    assert grid.edge_notes({"concurrency_limit": 2, "max_batch_size": 4, "max_threads": 40}) == [
        "max_batch_size=4 is the largest value tried: extend the grid past it"
    ]
    assert grid.edge_notes({"concurrency_limit": 1, "max_batch_size": 1}) == []  # nothing below 1
    low = build_grid(["max_threads=8,40"]).edge_notes({"max_threads": 8})
    assert low == ["max_threads=8 is the smallest value tried: extend the grid below it"]


@pytest.mark.parametrize(
    ("axes", "bad"),
    [
        ({"concurrency_limit": [1, "a"]}, "'a'"),
        ({"max_batch_size": [True]}, "True"),
        ({"max_size": ["lots"]}, "'lots'"),
    ],
)
def test_server_knob_values_must_be_numbers(axes: dict[str, list[object]], bad: str) -> None:
    with pytest.raises(ScenarioError, match=f"grid axis .*value {bad}.*expected a number"):
        build_grid(axes)


def test_server_knob_words_and_client_strings_are_accepted() -> None:
    grid = build_grid(["concurrency_limit=none,default,2", "max_size=unlimited,8", "concurrency_id=a,b"])
    assert grid.size == 12
    with pytest.raises(ScenarioError, match="'a'"):
        build_grid(["concurrency_limit=a,b"])


def test_launch_knobs_num_workers_and_ssr_mode() -> None:
    grid = build_grid(["num_workers=0,2", "ssr_mode=true,false"], [])
    ids = [p.point_id for p in grid.points()]
    assert ids == ["nw0-ssrTrue", "nw0-ssrFalse", "nw2-ssrTrue", "nw2-ssrFalse"]
    assert all(set(p.server_knobs()) == {"num_workers", "ssr_mode"} for p in grid.points())
    with pytest.raises(ScenarioError, match="axis 'ssr_mode': value 'maybe' is not valid; expected true"):
        build_grid(["ssr_mode=maybe"], [])
    with pytest.raises(ScenarioError, match="grid axis 'num_workers': value 'two' is not valid"):
        build_grid(["num_workers=two"], [])
