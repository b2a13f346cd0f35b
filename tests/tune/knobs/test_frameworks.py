"""Each framework's own knobs (qbench/tune/knobs/frameworks.py): which an app's code imports, a knob the
framework lacks refused naming its equivalent, the winner as each framework's code; every framework's
knobs are grid knobs."""

from __future__ import annotations

import pytest

from qbench.tune.knobs.frameworks import (
    app_framework,
    bentoml_code,
    check_framework_knobs,
    check_framework_values,
    litserve_code,
    rayserve_code,
    torchserve_code,
)
from qbench.tune.knobs.grid import check_knob, parse_axis
from qbench.tune.knobs.versions import KnobVersionError


@pytest.mark.parametrize(("source", "framework"), [
    ("import litserve as ls\n", "litserve"),
    ("from litserve import LitAPI\n", "litserve"),
    ("    from litserve.api import LitAPI\n", "litserve"),
    ("import gradio as gr\n", None),
    ("# import litserve one day\nimport litserver_x\n", None),
])
def test_the_framework_an_app_imports(source: str, framework: str | None) -> None:
    assert app_framework(source) == framework


def test_litserve_takes_its_own_knobs() -> None:
    check_framework_knobs(["max_batch_size", "batch_timeout", "workers_per_device"], "litserve", "app.py")


@pytest.mark.parametrize(("knob", "says"), [
    ("concurrency_limit", "the equivalent there is workers_per_device (inference processes per device"),
    ("concurrency_count", "workers_per_device"),
    ("batch_wait_ms", "batch_timeout (seconds: batch_wait_ms=10 is batch_timeout=0.01)"),
    ("max_size", "it has no equivalent"),
])
def test_a_knob_litserve_lacks_names_the_equivalent(knob: str, says: str) -> None:
    with pytest.raises(KnobVersionError) as error:
        check_framework_knobs([knob], "litserve", "--app app.py")
    text = str(error.value)
    assert text.startswith(f"--app app.py is a LitServe app, which has no {knob!r} knob") and says in text
    assert "its knobs: max_batch_size, batch_timeout, workers_per_device" in text


def test_litserve_knobs_are_not_per_event() -> None:
    with pytest.raises(KnobVersionError, match="not per event"):
        check_framework_knobs(["max_batch_size@a"], "litserve", "app.py")


def test_gradio_lacks_litserves_knobs_and_keeps_its_own() -> None:
    own = ["concurrency_limit", "max_batch_size", "batch_wait_ms", "max_size@a"]
    check_framework_knobs(own, "gradio", "x")
    with pytest.raises(KnobVersionError, match="concurrency_limit \\(per event"):
        check_framework_knobs(["workers_per_device"], "gradio", "the reference server")
    with pytest.raises(KnobVersionError, match="no 'batch_timeout' knob; the equivalent there is none in"):
        check_framework_knobs(["batch_timeout"], "gradio", "the reference server")


def test_the_winner_as_litserve_code_keeps_the_apps_own_settings_where_unswept() -> None:
    own = {"batch_timeout": 0.01, "workers_per_device": 1}
    code = litserve_code({"max_batch_size": 16}, "BatchedAPI", own)
    assert code.splitlines() == [
        "# predict() gets a list of up to max_batch_size inputs (batch/unbatch split them)",
        "api = BatchedAPI(max_batch_size=16, batch_timeout=0.01)",
        "server = ls.LitServer(api, workers_per_device=1)",
    ]
    assert litserve_code({"workers_per_device": 2}).splitlines() == [
        "api = MyAPI()", "server = ls.LitServer(api, workers_per_device=2)"]


def test_a_bentoml_service_is_known_and_its_knobs_named_as_bentomls() -> None:
    assert app_framework("import bentoml\n\n@bentoml.service\nclass S: ...\n") == "bentoml"
    assert app_framework("from bentoml import service\n") == "bentoml"
    for own in ("max_batch_size", "max_latency_ms", "workers", "max_concurrency"):
        check_framework_knobs([own], "bentoml", "--app service.py")
    with pytest.raises(KnobVersionError) as error:
        check_framework_knobs(["max_size"], "bentoml", "--app service.py")
    assert "the equivalent there is max_concurrency (requests in flight per worker" in str(error.value)
    with pytest.raises(KnobVersionError, match="no 'workers' knob; the equivalent there is concurrency_lim"):
        check_framework_knobs(["workers"], "gradio", "the reference server")


def test_bentoml_batches_of_one_are_code_not_a_knob() -> None:
    check_framework_values({"max_batch_size": [2, 16]}, "bentoml", "x")
    check_framework_values({"max_batch_size": [1, 8]}, "litserve", "x")  # LitServe's 1: no batching
    with pytest.raises(KnobVersionError, match="max_batch_size=1 is not one BentoML takes"):
        check_framework_values({"max_batch_size": [1, 8]}, "bentoml", "--app service.py")


def test_the_winner_as_bentoml_code_keeps_the_services_own_settings_where_unswept() -> None:
    code = bentoml_code({"max_batch_size": 8, "max_concurrency": 40}, "Batched", "predict",
                        {"max_latency_ms": 1000, "workers": 1, "max_batch_size": 16})
    assert code.splitlines() == [
        '@bentoml.service(workers=1, traffic={"max_concurrency": 40})', "class Batched:",
        "    @bentoml.api(batchable=True, max_batch_size=8, max_latency_ms=1000)",
        "    def predict(self, ...): ..."]


@pytest.mark.parametrize("source", [
    "from ray import serve\n", "import ray.serve as serve\n", "from ray.serve import batch\n",
    "from ray import tune, serve\n", "    from ray.serve.handle import DeploymentHandle\n"])
def test_a_ray_serve_app_is_known_by_its_import(source: str) -> None:
    assert app_framework(source) == "rayserve"


@pytest.mark.parametrize("source", ["import ray\n", "from ray import tune\n", "import rayserver\n"])
def test_ray_without_serve_is_not_ray_serve(source: str) -> None:
    assert app_framework(source) is None


def test_ray_serve_takes_its_own_knobs_and_names_the_equivalents() -> None:
    for own in ("max_batch_size", "batch_wait_timeout_s", "max_concurrent_batches", "num_replicas",
                "max_ongoing_requests", "max_queued_requests"):
        check_framework_knobs([own], "rayserve", "--app app.py")
    with pytest.raises(KnobVersionError) as error:
        check_framework_knobs(["concurrency_limit"], "rayserve", "--app app.py")
    assert "the equivalent there is max_ongoing_requests (requests each replica runs at once" in str(
        error.value)
    with pytest.raises(KnobVersionError, match="batch_wait_timeout_s \\(seconds: batch_wait_ms=10 is"):
        check_framework_knobs(["batch_wait_ms"], "rayserve", "--app app.py")
    with pytest.raises(KnobVersionError, match="no 'max_queued_requests' knob; the equivalent there is max_"):
        check_framework_knobs(["max_queued_requests"], "gradio", "the reference server")
    with pytest.raises(KnobVersionError, match="not per event"):
        check_framework_knobs(["max_ongoing_requests@a"], "rayserve", "--app app.py")


def test_every_frameworks_knobs_are_grid_knobs() -> None:
    """BentoML's workers, max_concurrency and max_latency_ms, and Ray Serve's, can be swept."""
    for knob in ("workers", "max_concurrency", "max_latency_ms", "num_replicas", "max_ongoing_requests",
                 "max_queued_requests", "batch_wait_timeout_s", "max_concurrent_batches", "batch_size",
                 "max_batch_delay", "job_queue_size"):
        check_knob(knob, "--grid")
    assert parse_axis("batch_wait_timeout_s=0.005,0.05") == ("batch_wait_timeout_s", [0.005, 0.05])


def test_the_winner_as_ray_serve_code_keeps_the_apps_own_settings_where_unswept() -> None:
    code = rayserve_code({"max_batch_size": 16, "max_ongoing_requests": 32}, "BatchedModel", "predict",
                         {"max_batch_size": 4, "batch_wait_timeout_s": 0.01, "max_concurrent_batches": 1},
                         {"num_replicas": 1, "max_ongoing_requests": 5, "max_queued_requests": -1})
    assert code.splitlines() == [
        "@serve.deployment(num_replicas=1, max_ongoing_requests=32, max_queued_requests=-1)",
        "class BatchedModel:",
        "    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.01, max_concurrent_batches=1)",
        "    async def predict(self, inputs: list) -> list: ...",
        "# or in a Serve config file (serve deploy / serve run config.yaml):",
        "#   deployments: [{name: BatchedModel, num_replicas: 1, max_ongoing_requests: 32, "
        "max_queued_requests: -1}]"]
    unbatched = rayserve_code({"num_replicas": 2}, "Model", batched=False)
    assert unbatched.splitlines()[:2] == ["@serve.deployment(num_replicas=2)", "class Model:"]


ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


def test_a_torchserve_config_is_known_and_its_knobs_named_as_torchserves() -> None:
    assert app_framework((ROOT / "examples" / "torchserve" / "config.properties").read_text()) == "torchserve"
    assert app_framework("# model_store=x\nother=1\n") is None
    check_framework_knobs(["batch_size", "max_batch_delay", "workers", "job_queue_size"], "torchserve", "t")
    for knob, equivalent in (("max_batch_size", "batch_size"), ("concurrency_limit", "workers"),
                             ("max_size", "job_queue_size"), ("batch_timeout", "max_batch_delay")):
        with pytest.raises(KnobVersionError, match=f"TorchServe app, which has no '{knob}' knob; the "
                                                   f"equivalent there is {equivalent}"):
            check_framework_knobs([knob], "torchserve", "--app config.properties")
    for framework, equivalent in (("litserve", "max_batch_size"), ("rayserve", "max_batch_size"),
                                  ("gradio", "max_batch_size")):
        with pytest.raises(KnobVersionError, match=f"no 'batch_size' knob; the equivalent there is "
                                                   f"{equivalent}"):
            check_framework_knobs(["batch_size"], framework, "x")
    with pytest.raises(KnobVersionError, match="no 'job_queue_size' knob; the equivalent there is max_q"):
        check_framework_knobs(["job_queue_size"], "rayserve", "x")


def test_the_winner_as_torchserve_configuration_keeps_the_models_own_settings_where_unswept() -> None:
    code = torchserve_code({"batch_size": 16}, [{"name": "batched", "version": "1.0"}],
                           {"batch_size": 4, "max_batch_delay": 10, "workers": 1, "job_queue_size": 100})
    assert code.splitlines() == [
        "# config.properties",
        'models={"batched": {"1.0": {"batchSize": 16, "maxBatchDelay": 10, "minWorkers": 1, '
        '"maxWorkers": 1}}}',
        "job_queue_size=100",
        "# or in the model's model-config.yaml (torch-model-archiver --config-file; it wins over models=):",
        "#   batchSize: 16", "#   maxBatchDelay: 10", "#   minWorkers: 1", "#   maxWorkers: 1",
        "#   jobQueueSize: 100"]
    assert 'models={"my_model": {"1.0": {"batchSize": 2}}}' in torchserve_code({"batch_size": 2})
