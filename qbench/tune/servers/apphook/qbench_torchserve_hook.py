"""qbench's startup hook for TorchServe: the launcher of a point's TorchServe, and its batch counter.
`python -m qbench_torchserve_hook config.properties` runs TorchServe on the point's copy of the user's
config.properties (ports, store, knobs) and records what it runs with; in TorchServe's workers `patch`
counts each batch handed to the model's handler. Standard library only."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

from qbench_hook_batches import BatchCounter  # type: ignore[import-not-found]  # beside this file

KNOBS = ("batch_size", "max_batch_delay", "workers", "job_queue_size")
#: TorchServe 0.12's own defaults (ConfigManager, Model): a model's batch of 1, 100 ms, 100 waiting
DEFAULTS = {"batch_size": 1, "max_batch_delay": 100, "job_queue_size": 100}
#: a model's settings in models= and model-config.yaml -> the knob
MODEL_KEYS = {"batchSize": "batch_size", "maxBatchDelay": "max_batch_delay", "minWorkers": "workers"}
READY_POLL_S = 0.2
READY_TIMEOUT_S = 600.0
STOP_WAIT_S = 4.0  # the most TorchServe's shutdown is waited for (qbench SIGKILLs the group at 5 s)


# ---------------------------------------------------------------- the workers: batches counted


def patch(module: Any, hook: Any) -> None:
    """ts.service: count the size of each batch Service.predict hands the model's handler."""
    service: Any = getattr(module, "Service", None)
    predict = getattr(service, "predict", None)
    if service is None or predict is None or getattr(predict, "_qbench", False):
        return
    counter = BatchCounter(hook.record_path)

    @functools.wraps(predict)
    def counted(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            name = getattr(self.context, "model_name", None) or "?"
            counter.add(f"/predictions/{name}", len(batch))
        except Exception:  # noqa: BLE001 - counting never breaks a prediction
            pass
        return predict(self, batch, *args, **kwargs)

    counted._qbench = True  # type: ignore[attr-defined]
    service.predict = counted


# ---------------------------------------------------------------- the launcher


def read_properties(path: Path) -> dict[str, str]:
    """Java properties: `key=value` lines, # and ! comments (what config.properties uses)."""
    settings: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "!")):
            key, sep, value = text.partition("=")
            if sep:
                settings[key.strip()] = value.strip()
    return settings


def loaded_models(settings: dict[str, str], store: Path) -> list[dict[str, Any]]:
    """The models config.properties loads: each one's name, version and model-config.yaml settings."""
    wanted = [part.strip() for part in settings.get("load_models", "").split(",") if part.strip()]
    if [w.lower() for w in wanted] == ["all"]:
        wanted = sorted(p.name for p in store.iterdir() if p.is_dir() or p.suffix == ".mar")
    models = []
    for entry in wanted:
        name, _, path = entry.rpartition("=")
        folder = store / (path or entry)
        name = name or Path(path or entry).stem
        manifest = _manifest(folder)
        model = manifest.get("model") or {}
        models.append({"name": name, "version": str(model.get("modelVersion") or "1.0"),
                       "yaml": _yaml_settings(folder, model.get("configFile"))})
    return models


def model_file(model: Path, name: str) -> str | None:
    """A file of a model, by its path inside it: in its folder, or in its .mar archive (a zip)."""
    try:
        if model.is_file():
            with zipfile.ZipFile(model) as archive:
                return archive.read(name).decode("utf-8")
        return (model / name).read_text(encoding="utf-8")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


def _manifest(model: Path) -> dict[str, Any]:
    try:
        found = json.loads(model_file(model, "MAR-INF/MANIFEST.json") or "")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _yaml_settings(model: Path, name: Any) -> dict[str, Any]:
    """{knob: value} from a model's model-config.yaml (flat `key: int` lines: no PyYAML here)."""
    text = model_file(model, str(name)) if name else None
    if text is None:
        return {}
    lines = text.splitlines()
    found: dict[str, Any] = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "\t")) and key.strip() in (*MODEL_KEYS, "jobQueueSize"):
            try:
                found[MODEL_KEYS.get(key.strip(), "job_queue_size")] = int(value.split("#")[0].strip())
            except ValueError:
                continue
    return found


def point_settings(settings: dict[str, str], models: list[dict[str, Any]], knobs: dict[str, Any], port: int,
                   store: Path) -> dict[str, str]:
    """The user's settings with the point's ports, store, knobs (models= merged) and no token."""
    own_models = _json(settings.get("models", "")) or {}
    merged: dict[str, Any] = {name: dict(versions) for name, versions in own_models.items()
                              if isinstance(versions, dict)}
    for model in models:
        entry = merged.setdefault(model["name"], {}).setdefault(model["version"], {})
        if "batch_size" in knobs:
            entry["batchSize"] = int(knobs["batch_size"])
        if "max_batch_delay" in knobs:
            entry["maxBatchDelay"] = int(knobs["max_batch_delay"])
        if "workers" in knobs:
            entry["minWorkers"] = entry["maxWorkers"] = int(knobs["workers"])
    out = dict(settings)
    out.update({"inference_address": f"http://127.0.0.1:{port}",
                "management_address": f"http://127.0.0.1:{port + 1}",
                "metrics_address": f"http://127.0.0.1:{port + 2}", "grpc_inference_port": str(port + 3),
                "grpc_management_port": str(port + 4), "model_store": str(store)})
    out.setdefault("disable_token_authorization", "true")
    if merged:
        out["models"] = json.dumps(merged)
    if "job_queue_size" in knobs:
        out["job_queue_size"] = str(int(knobs["job_queue_size"]))
    if "workers" in knobs:
        out["default_workers_per_model"] = str(int(knobs["workers"]))
    return out


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def own_settings(settings: dict[str, str], model: dict[str, Any]) -> dict[str, Any]:
    """What a model runs with by the user's own files (yaml, else models=, else TorchServe's defaults)."""
    from_config = ((_json(settings.get("models", "")) or {}).get(model["name"]) or {}).get(model["version"]) \
        or {}
    own: dict[str, Any] = {}
    for key, knob in MODEL_KEYS.items():
        value = model["yaml"].get(knob) or (from_config.get(key) if isinstance(from_config, dict) else None)
        own[knob] = value if isinstance(value, int) and value > 0 else DEFAULTS.get(knob)
    if own.get("workers") is None:
        default = int(settings.get("default_workers_per_model", "0") or 0)
        own["workers"] = default or os.cpu_count() or 1
    own["job_queue_size"] = model["yaml"].get("job_queue_size") or int(settings.get("job_queue_size", 100))
    return own


def describe(management: str, model: dict[str, Any]) -> dict[str, Any] | None:
    """The management API's description of one model (None: not there yet)."""
    try:
        with urllib.request.urlopen(f"{management}/models/{model['name']}/{model['version']}",
                                    timeout=2) as answer:
            found = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    return found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else None


def effective(described: dict[str, Any]) -> dict[str, Any]:
    """What TorchServe runs a model with, as its management API says: the knobs' values."""
    workers = [w for w in described.get("workers") or [] if isinstance(w, dict)]
    queue = described.get("jobQueueStatus") or {}
    return {"batch_size": described.get("batchSize"), "max_batch_delay": described.get("maxBatchDelay"),
            "workers": sum(1 for w in workers if w.get("status") == "READY"),
            "min_workers": described.get("minWorkers"),
            "job_queue_size": (queue.get("remainingCapacity", 0) + queue.get("pendingRequests", 0))
            if queue else None}


def ready(described: dict[str, Any] | None) -> bool:
    workers = [w for w in (described or {}).get("workers") or [] if isinstance(w, dict)]
    return described is not None and len(workers) >= int(described.get("minWorkers") or 1) and all(
        w.get("status") == "READY" for w in workers)


def write_record(path: str, record: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, default=str)
    os.replace(tmp, path)


def _version() -> str | None:
    try:
        return metadata.version("torchserve")
    except metadata.PackageNotFoundError:
        return None


def main(argv: list[str]) -> int:
    """Run TorchServe on the point's copy of config.properties (argv[0]) until it is stopped."""
    plan = json.loads(os.environ.get("QBENCH_HOOK") or "{}")
    if len(argv) != 1 or not plan.get("record") or not plan.get("port"):
        print("usage: QBENCH_HOOK=... python -m qbench_torchserve_hook config.properties", file=sys.stderr)
        return 2
    config, port, record_path = Path(argv[0]).resolve(), int(plan["port"]), str(plan["record"])
    knobs = {k: v for k, v in (plan.get("knobs") or {}).items() if k in KNOBS}
    work = Path(record_path).resolve().parent / "torchserve"  # TorchServe runs in the config's folder
    (work / "logs").mkdir(parents=True, exist_ok=True)
    settings = read_properties(config)
    store = (config.parent / settings.get("model_store", "model_store")).resolve()
    models = loaded_models(settings, store)
    point = work / "config.properties"
    point.write_text("".join(f"{k}={v}\n" for k, v in point_settings(settings, models, knobs, port,
                                                                      store).items()), encoding="utf-8")
    unknown = sorted(k for k in plan.get("knobs") or {} if k not in KNOBS)
    record: dict[str, Any] = {
        "hook_version": 1, "framework": "torchserve", "launched": False, "knobs": plan.get("knobs") or {},
        "observed": [], "problems": [f"{', '.join(unknown)}: not a TorchServe knob (TorchServe's: "
                                     f"{', '.join(KNOBS)}); not set"] if unknown else [],
        "torchserve": {"version": _version(), "config": str(config), "point_config": str(point),
                       "models": [{"name": m["name"], "version": m["version"], "yaml": m["yaml"],
                                   "app": own_settings(settings, m), "set": knobs, "effective": {}}
                                  for m in models]}}
    if not models:
        record["problems"].append(f"{config}: load_models names no model of its store {store}")
    write_record(record_path, record)
    # the worker sockets in a short folder of their own (java.io.tmpdir: an AF_UNIX path has at most 107
    # bytes, and a point's folder is deeper), gone when TorchServe is
    sockets = tempfile.mkdtemp(prefix="qbench-ts-")
    signal.signal(signal.SIGTERM, _stop)  # qbench stops the point's process group: clean up first
    env = {**os.environ, "TMPDIR": str(work), "TEMP": sockets, "LOG_LOCATION": str(work / "logs"),
           "METRICS_LOCATION": str(work / "logs")}
    try:
        process = subprocess.Popen([sys.executable, "-m", "ts.model_server", "--start", "--foreground",
                                    "--ncs", "--ts-config", str(point)], cwd=config.parent, env=env)
        return serve(process, record, record_path, models, port, work / ".model_server.pid")
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def serve(process: subprocess.Popen[bytes], record: dict[str, Any], record_path: str,
          models: list[dict[str, Any]], port: int, pid_file: Path) -> int:
    """Record TorchServe `launched` once every model's workers are READY, then wait for it to end; on
    qbench's SIGTERM let its shutdown run, then end its Java frontend (`frontend_gone`)."""
    management = f"http://127.0.0.1:{port + 1}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while process.poll() is None and time.monotonic() < deadline:
        described = [describe(management, m) for m in models]
        if models and all(ready(d) for d in described):
            for entry, found in zip(record["torchserve"]["models"], described, strict=True):
                entry["effective"] = effective(found or {})
            record["launched"] = True
            write_record(record_path, record)
            break
        time.sleep(READY_POLL_S)
    try:
        return process.wait()
    except SystemExit:
        deadline = time.monotonic() + STOP_WAIT_S
        try:
            process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
        frontend_gone(pid_file, deadline)  # none outlives the point
        raise


def frontend_gone(pid_file: Path, deadline: float) -> None:
    """Wait until `deadline` for TorchServe's Java frontend (pid in `pid_file`) to exit, then kill it."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return


def alive(pid: int) -> bool:
    """A process `pid` that has not exited (on Linux a zombie, awaiting its parent's reaping, has)."""
    if not os.path.isdir("/proc"):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
