"""qbench's TorchServe launcher (qbench/tune/servers/apphook/qbench_torchserve_hook.py), its pure parts:
the point's copy of the user's config.properties (ports, store, knobs merged into models=, no token), the
models it loads and what their model-config.yaml sets, the user's own settings, and TorchServe's
description of a model read back as the knobs' values. Run end to end in
tests/docs/test_docs_torchserve.py."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from qbench.tune.servers.apphook import HOOK_FILES

HOOK_DIR = HOOK_FILES[0].parent


@pytest.fixture
def launcher(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(HOOK_DIR))  # as in a point: the hook's folder on PYTHONPATH
    monkeypatch.delitem(sys.modules, "qbench_torchserve_hook", raising=False)
    import qbench_torchserve_hook  # type: ignore[import-not-found]

    module: ModuleType = qbench_torchserve_hook
    return module


def store(tmp_path: Path, yaml: str = "") -> Path:
    folder = tmp_path / "model_store" / "batched"
    (folder / "MAR-INF").mkdir(parents=True)
    model = {"modelName": "batched", "handler": "handler.py", "modelVersion": "2.0"}
    if yaml:
        model["configFile"] = "model-config.yaml"
        (folder / "model-config.yaml").write_text(yaml)
    (folder / "MAR-INF" / "MANIFEST.json").write_text(json.dumps({"model": model}))
    return tmp_path / "model_store"


def test_the_point_config_has_its_ports_store_knobs_and_no_token(launcher: ModuleType,
                                                                 tmp_path: Path) -> None:
    models_store = store(tmp_path)
    settings = {"inference_address": "http://0.0.0.0:8080", "model_store": "model_store",
                "load_models": "batched", "models": json.dumps({"batched": {"2.0": {"batchSize": 4,
                                                                                    "responseTimeout": 30}}})}
    models = launcher.loaded_models(settings, models_store)
    assert models == [{"name": "batched", "version": "2.0", "yaml": {}}]
    point = launcher.point_settings(settings, models, {"batch_size": 16, "workers": 2, "job_queue_size": 7},
                                    9000, models_store)
    assert point["inference_address"] == "http://127.0.0.1:9000"
    assert point["management_address"] == "http://127.0.0.1:9001"
    assert point["metrics_address"] == "http://127.0.0.1:9002"
    assert (point["grpc_inference_port"], point["grpc_management_port"]) == ("9003", "9004")
    assert point["model_store"] == str(models_store) and point["disable_token_authorization"] == "true"
    assert json.loads(point["models"]) == {"batched": {"2.0": {"batchSize": 16, "responseTimeout": 30,
                                                               "minWorkers": 2, "maxWorkers": 2}}}
    assert point["job_queue_size"] == "7" and point["default_workers_per_model"] == "2"
    kept = launcher.point_settings({**settings, "disable_token_authorization": "false"}, models, {}, 9000,
                                   models_store)
    assert kept["disable_token_authorization"] == "false"  # the user's own choice stays


def test_the_users_own_settings_yaml_first_then_models_then_defaults(launcher: ModuleType,
                                                                    tmp_path: Path) -> None:
    models_store = store(tmp_path, "minWorkers: 1\nmaxWorkers: 1\nbatchSize: 8\nhandler:\n  x: 1\n"
                                   "jobQueueSize: 40 # a comment\n")
    settings = {"model_store": "model_store", "load_models": "all",
                "models": json.dumps({"batched": {"2.0": {"batchSize": 4, "maxBatchDelay": 50}}})}
    (model,) = launcher.loaded_models(settings, models_store)
    assert model["yaml"] == {"workers": 1, "batch_size": 8, "job_queue_size": 40}
    assert launcher.own_settings(settings, model) == {"batch_size": 8, "max_batch_delay": 50, "workers": 1,
                                                      "job_queue_size": 40}
    bare = {"name": "batched", "version": "2.0", "yaml": {}}
    assert launcher.own_settings({"default_workers_per_model": "3"}, bare) == {
        "batch_size": 1, "max_batch_delay": 100, "workers": 3, "job_queue_size": 100}


def test_torchserves_description_read_back_as_the_knobs(launcher: ModuleType) -> None:
    described = {"batchSize": 16, "maxBatchDelay": 10, "minWorkers": 2,
                 "workers": [{"status": "READY"}, {"status": "UNLOADING"}],
                 "jobQueueStatus": {"remainingCapacity": 95, "pendingRequests": 5}}
    assert launcher.effective(described) == {"batch_size": 16, "max_batch_delay": 10, "workers": 1,
                                              "min_workers": 2, "job_queue_size": 100}
    assert not launcher.ready(described) and not launcher.ready(None)
    assert launcher.ready({**described, "workers": [{"status": "READY"}] * 2})


def test_a_mar_archive_is_read_as_its_folder_would_be(launcher: ModuleType, tmp_path: Path) -> None:
    folder = store(tmp_path, "batchSize: 8\nmaxBatchDelay: 5\n").parent / "model_store" / "batched"
    archive_path = tmp_path / "model_store" / "packed.mar"
    with zipfile.ZipFile(archive_path, "w") as archive:
        for name in ("MAR-INF/MANIFEST.json", "model-config.yaml"):
            archive.write(folder / name, name)
    (model,) = launcher.loaded_models({"load_models": "mine=packed.mar"}, tmp_path / "model_store")
    assert model == {"name": "mine", "version": "2.0", "yaml": {"batch_size": 8, "max_batch_delay": 5}}
    broken = tmp_path / "model_store" / "broken.mar"
    broken.write_text("not a zip")
    assert launcher.loaded_models({"load_models": "broken.mar"}, tmp_path / "model_store") == [
        {"name": "broken", "version": "1.0", "yaml": {}}]


def test_the_frontend_outliving_its_launcher_is_waited_for_then_killed(launcher: ModuleType, tmp_path: Path
                                                                       ) -> None:
    """On qbench's stop, TorchServe's launcher exits at once and its Java frontend (pid in TorchServe's pid
    file) shuts down after it: the hook waits for it, and kills it at the deadline, so that a restart on
    the same folder does not find it alive ("TorchServe is already running")."""
    import signal
    import subprocess
    import time

    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                                 "time.sleep(60)"], stdout=subprocess.PIPE)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"up\n"
    pid_file = tmp_path / ".model_server.pid"
    pid_file.write_text(f"{stubborn.pid}\n")
    stubborn.send_signal(signal.SIGTERM)  # ignored: still shutting down at the deadline
    launcher.frontend_gone(pid_file, time.monotonic() + 0.3)
    assert stubborn.wait(timeout=10) == -signal.SIGKILL
    assert not launcher.alive(stubborn.pid)
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])  # ends by itself
    pid_file.write_text(f"{quick.pid}\n")
    launcher.frontend_gone(pid_file, time.monotonic() + 30)
    assert quick.wait(timeout=10) == 0  # waited for, not killed
    launcher.frontend_gone(tmp_path / "absent.pid", time.monotonic() + 30)  # no pid file: nothing to wait
