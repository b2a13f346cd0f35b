"""Mixes (and journeys) against real Gradio apps written as users write them: the main env's Gradio
(6.x) and the per-release envs' 4.44.1 and 3.50.2 (tests/gradio_versions/mix_app.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from qbench.run.pipeline import run_scenario
from qbench.run.scenario.schema import parse_scenario

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
    # 36 requests (what 6 s at 6/s sent): their endpoints are drawn by request id from the mix's
    # seed, so the counts are the same on any machine (a 14, b 14, c 8)
    spec = parse_scenario({"name": "abc", "mix": mix,
                           "load": {"rate": 6, "arrival": "poisson", "requests": 36, "timeout": 60}})
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


def test_a_chat_journey_reaches_the_app_as_turns_of_one_session(mix_app: MixApp, tmp_path: Path) -> None:
    """The issue's journey (a step, then 4 chat turns): the ChatInterface sees histories of 0, 1, 2
    and 3 exchanges in equal numbers (journeys cut off by the end of the run aside)."""
    steps = [{"endpoint": {"api_name": "a"}, "payload": TEXT},
             {"endpoint": {"api_name": "chat"}, "payload": {"inputs": [{"text": {"words": [3, 12]}}]},
              "repeat": 4, "think_time": 0.05}]
    users = 3
    # 30 requests, 6 journeys of 5: the budget cuts at most each user's journey in progress (4
    # requests at most), so at least 4 complete, on any machine (a 5 s run sent ~100)
    spec = parse_scenario({"name": "chat-journey", "journey": steps,
                           "load": {"users": users, "requests": 30, "timeout": 60}})
    result = run_scenario(spec, target=mix_app.url, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    seen = {int(k): v for k, v in json.loads(mix_app.seen.read_text()).items()}
    assert set(seen) == {0, 1, 2, 3}, seen  # never a 5th turn: a new journey is a new session
    assert seen[0] - seen[3] <= users and seen[3] >= 2, seen  # equal, but for journeys cut off
    chats = Counter(r.turn for r in records if r.endpoint == "chat")
    assert [chats[t] for t in range(4)] == [seen[t] for t in range(4)]  # every turn the app saw is ours
    per_journey = {r.journey_id: r.session_id for r in records}
    assert all(r.session_id == per_journey[r.journey_id] for r in records)
    assert len(set(per_journey.values())) == len(per_journey)
    journeys = result.summary.journeys
    assert journeys is not None and journeys.completed >= 2 and journeys.duration.count == journeys.completed


def test_output_files_are_fetched_as_the_releases_client_does(mix_app: MixApp, tmp_path: Path) -> None:
    """From 4.x an image output is a file the client downloads (timed as `download`); 3.x sends it
    inline as base64 (nothing to fetch)."""
    spec = parse_scenario({"name": "picture", "endpoint": {"api_name": "picture"}, "payload": TEXT,
                           "load": {"requests": 4, "rate": 4, "timeout": 60}})
    result = run_scenario(spec, target=mix_app.url, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    if mix_app.version.startswith("3."):
        assert all(r.downloads == 0 and r.bytes_received > 10_000 for r in records)
    else:
        assert all(r.downloads == 1 and r.download_bytes > 10_000 for r in records)
        assert all(r.download_s is not None and r.bytes_received > r.download_bytes for r in records)
