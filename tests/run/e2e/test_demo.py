"""`qbench demo --preset NAME`: the embedded scenario calls an endpoint of the preset, with its input kind."""

from __future__ import annotations

import pytest

from qbench.demo import DEMO_CALLS, demo_scenario
from qbench.errors import ScenarioError
from reference_server.settings import load_preset

#: The generated input each model workload takes.
INPUT_KIND = {
    "image-classification": "image",
    "text-classification": "text",
    "embeddings": "text",
    "audio-classification": "audio",
    "text-generation": "text",
}


@pytest.mark.parametrize("preset", sorted(DEMO_CALLS))
def test_demo_scenario_matches_the_preset(preset: str) -> None:
    scenario = demo_scenario(preset, {"load.duration": 3})
    functions = {f.api_name: f.workload for f in load_preset(preset).functions}
    assert scenario.endpoint.api_name in functions
    (generated,) = scenario.model_dump()["payload"]["inputs"]
    kind = next(k for k, v in generated.items() if v is not None)
    assert kind == INPUT_KIND[functions[scenario.endpoint.api_name]]
    assert scenario.name == f"demo-{preset}" and scenario.load.duration == 3


def test_demo_refuses_a_preset_it_has_no_scenario_for() -> None:
    with pytest.raises(ScenarioError, match="'sleep': expected one of image, text, audio, chat, abc"):
        demo_scenario("sleep")


def test_the_abc_demo_is_a_mix_of_the_presets_three_events() -> None:
    scenario = demo_scenario("abc", {"load.duration": 3})
    assert scenario.mix is not None and [e.endpoint.api_name for e in scenario.mix] == ["a", "b", "c"]
    assert {f.api_name for f in load_preset("abc").functions} == {"a", "b", "c"}
