"""Everything the lifespan builds once and the handlers share: workloads, queue, files, metrics."""

from __future__ import annotations

import importlib.util
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference_server.http.api_config import build_config
from reference_server.io.components import FileStore
from reference_server.io.decode_pool import DecodePool, worker_count
from reference_server.observe.gpu import GpuSampler
from reference_server.observe.metrics import ServerMetrics
from reference_server.observe.profiling import TraceCollector
from reference_server.observe.token_log import TokenLog
from reference_server.queue.queue import EventQueue
from reference_server.queue.runtime import FunctionRuntime
from reference_server.settings import ServerSettings, SettingsError
from reference_server.workloads.base import WorkloadConfigError
from reference_server.workloads.registry import build_workload

#: Workload kinds that never touch torch (the device is not resolved for them).
TORCH_FREE_KINDS = frozenset({"echo", "sleep", "stream", "tokens", "fail", "imageop", "image-ideal"})


def build_functions(settings: ServerSettings) -> list[FunctionRuntime]:
    """Build (not load) each function's workload; SettingsError names the function and key."""
    functions = []
    for i, fs in enumerate(settings.functions):
        try:
            workload = build_workload(fs.workload, fs.params)
        except WorkloadConfigError as exc:
            raise SettingsError(f"functions[{i}] ({fs.api_name}): {exc}") from None
        functions.append(FunctionRuntime(i, fs, workload))
    check_batch_rules(settings, functions)
    return functions


def check_batch_rules(settings: ServerSettings, functions: list[FunctionRuntime]) -> None:
    for fn, fs in zip(functions, settings.functions, strict=True):
        if fs.batch and fn.workload.is_generator:
            raise SettingsError(
                f"functions[{fn.index}].batch = true: workload {fs.workload!r} is a generator, and Gradio "
                "does not allow batch=True with generators; set batch: false"
            )


def resolve_device(settings: ServerSettings) -> str:
    """"auto" -> "cuda" when torch is installed and sees a GPU, else "cpu" (torch imported only if needed)."""
    if settings.device != "auto":
        return settings.device
    if all(f.workload in TORCH_FREE_KINDS for f in settings.functions):
        return "cpu"
    if importlib.util.find_spec("torch") is None:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_workloads(settings: ServerSettings, functions: list[FunctionRuntime], device: str) -> None:
    """Load and warm every workload (blocking; the lifespan runs it in a thread)."""
    if settings.torch_threads is not None and any(f.workload.kind not in TORCH_FREE_KINDS for f in functions):
        import torch

        torch.set_num_threads(settings.torch_threads)
    for fn in functions:
        fn.workload.load(device)
        fn.workload.warmup()


def _one_image(fn: FunctionRuntime) -> bool:
    return [c.type for c in fn.workload.inputs] == ["image"]


@dataclass
class ServerState:
    settings: ServerSettings
    functions: list[FunctionRuntime]
    queue: EventQueue
    store: FileStore
    metrics: ServerMetrics
    config: dict[str, Any]
    device: str = "cpu"
    ready: bool = False
    started_at: float = field(default_factory=time.time)
    gpu: GpuSampler | None = None  # NVML telemetry, started by the lifespan (absent without a GPU)
    pool: DecodePool | None = None  # upload parsing and image decoding processes (decode_pool.py)
    tokens: TokenLog = field(default_factory=TokenLog)  # the OpenAI front's per-token send times
    _tmp: Any = None

    @classmethod
    def create(cls, settings: ServerSettings, file_dir: Path | None = None) -> ServerState:
        functions = build_functions(settings)
        tmp = None
        if file_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="qbench-server-")
            file_dir = Path(tmp.name)
        store = FileStore(file_dir, int(settings.launch.uploads_in_memory_mb * 1024 * 1024))
        metrics = ServerMetrics()
        queue = EventQueue(settings, functions, store, metrics, TraceCollector())
        # app_id: random per app, as Gradio's Blocks draws it (replicas behind a balancer tell apart by it)
        config = {**build_config(settings, functions), "app_id": random.getrandbits(64)}
        state = cls(settings, functions, queue, store, metrics, config, _tmp=tmp)
        return state

    def apply(self, settings: ServerSettings) -> None:
        """Live reconfiguration (admin endpoint)."""
        check_batch_rules(settings, self.functions)
        self.queue.reconfigure(settings)
        self.settings = settings
        self.config = {**build_config(settings, self.functions), "app_id": self.config["app_id"]}

    def start_pool(self) -> None:
        """Start the decode processes when a function takes images and the settings ask for them
        (blocking: the lifespan runs it in a thread)."""
        takes_images = any(c.type == "image" for fn in self.functions for c in fn.workload.inputs)
        workers = worker_count(self.settings.launch.decode_workers, self.device)
        if takes_images and workers > 0:
            preps = {fn.workload.pixel_prep() for fn in self.functions if _one_image(fn)}
            self.pool = DecodePool(workers, preps.pop() if len(preps) == 1 else None)
            self.pool.start()
            self.queue.runner.pool = self.pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.gpu is not None:
            self.gpu.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def torch_memory(self) -> dict[str, Any] | None:
        torch = sys.modules.get("torch")
        if torch is None or self.device != "cuda":
            return None
        return {"allocated_bytes": int(torch.cuda.memory_allocated()),
                "peak_allocated_bytes": int(torch.cuda.max_memory_allocated())}
