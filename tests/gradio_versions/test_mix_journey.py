"""Mixes (and journeys) against real Gradio apps written as users write them: the main env's Gradio
(6.x) and the per-release envs' 4.44.1 and 3.50.2 (tests/gradio_versions/mix_app.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from qbench.run.runner import run_scenario
from qbench.run.scenario import parse_scenario

from .envs import EnvError, ensure_env
from .servers import MAIN, serve_releases

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("mix_app.py")
VERSIONS = (MAIN, "4.44.1", "3.50.2")
TEXT = {"inputs": [{"text": {"words": [2, 4]}}]}


@dataclass(frozen=True)
class MixApp:
    version: str
    url: str
    seen: Path  # the chat's history lengths, as the app saw them


@pytest.fixture(scope="module", params=VERSIONS)
def mix_app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixApp]:
    version = str(request.param)
    if version != MAIN:
        try:
            ensure_env(version)
        except EnvError as exc:
            pytest.skip(f"gradio {version}: its env could not be built: {exc}")
    seen = tmp_path_factory.mktemp("seen") / "seen.json"
    with serve_releases([(version, {"seen": str(seen)})], app=APP) as (url,):
        yield MixApp(version, url, seen)


def test_a_weighted_mix_reports_each_event_on_its_own(mix_app: MixApp, tmp_path: Path) -> None:
    mix = [{"weight": w, "endpoint": {"api_name": n}, "payload": TEXT}
           for w, n in ((3, "a"), (2, "b"), (1, "c"))]
    spec = parse_scenario({"name": "abc", "mix": mix,
                           "load": {"rate": 6, "arrival": "poisson", "duration": 6, "timeout": 60}})
    result = run_scenario(spec, target=mix_app.url, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    counts = Counter(r.endpoint for r in records)
    n = len(records)
    assert counts["a"] > counts["c"] and abs(counts["a"] / n - 0.5) < 0.2, counts
    ends = result.summary.endpoints
    assert {k: e.requests for k, e in ends.items()} == dict(counts)
    service = {k: e.phase("service_s").p50 or 0.0 for k, e in ends.items()}
    assert 0.04 < service["a"] < service["c"] < service["b"], service  # each its own function's time
    assert service["b"] / service["a"] > 2.0, service
