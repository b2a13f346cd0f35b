"""Shared test fixtures. `reference_server.testing.serve_in_thread` starts a real server in a thread."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from qbench.tune.servers import preloaded
from qbench.tune.servers.apphook.sitecustomize import install as quiet_imports
from reference_server.settings import ServerSettings, synthetic_settings
from reference_server.testing import RunningServer, serve_in_thread
from tests.rewrite_cache import precompile
from tests.timing import known_seconds, log_line, slowest_first


@pytest.fixture
def echo_server() -> Iterator[RunningServer]:
    """A reference server with one `echo` function (fn_index 0, api_name "echo")."""
    with serve_in_thread(synthetic_settings()) as server:
        yield server


@pytest.fixture
def server_factory() -> Callable[..., AbstractContextManager[RunningServer]]:
    """`with server_factory(functions=[...], queue={...}) as server:` for custom settings."""

    def make(settings: ServerSettings | None = None, **fields: Any) -> AbstractContextManager[RunningServer]:
        return serve_in_thread(settings if settings is not None else synthetic_settings(**fields))

    return make


@pytest.fixture(autouse=True)
def _sweeps_unconfirmed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep confirms its winner's capacity with a 60 s run by default: the suite's sweeps skip it
    unless they ask for one (--confirm-duration, sweep.confirm_duration); tests/tune/sweep/test_confirm.py
    tests it, and the default itself."""
    monkeypatch.setattr("qbench.tune.sweep.config.DEFAULT_SWEEP_CONFIRM_S", 0.0)



_CPU_LOG = os.environ.get("QBENCH_TEST_CPU_LOG")


def _one_certificate_bundle() -> None:
    """Every httpx client (qbench's control calls, gradio_client's every request, the tests' own) reads
    its CA bundle when it is made: ~140 certificates, ~25 ms of CPU a client, thousands in a run of the
    suite. The suite's traffic is plain HTTP on loopback, so its processes (and the servers and apps they
    start, which inherit the environment) read a bundle of one certificate instead (SSL_CERT_FILE, which
    httpx and OpenSSL honour). What the environment named is kept in SSL_CERT_FILE_BEFORE_TESTS, for the
    one place the suite goes out: installing a release's env (tests/gradio_versions/envs.py)."""
    if "SSL_CERT_FILE_BEFORE_TESTS" in os.environ:
        return
    import tempfile
    from pathlib import Path

    import certifi

    bundle = Path(tempfile.gettempdir()) / f"qbench-tests-ca-{os.getuid()}.pem"
    if not bundle.exists():
        text = Path(certifi.where()).read_text(encoding="ascii")
        end = "-----END CERTIFICATE-----"
        part = bundle.with_suffix(f".{os.getpid()}")
        part.write_text(text[:text.index(end) + len(end)] + "\n", encoding="ascii")
        part.replace(bundle)  # atomic: a worker never reads a half-written bundle
    os.environ["SSL_CERT_FILE_BEFORE_TESTS"] = os.environ.get("SSL_CERT_FILE", "")
    os.environ["SSL_CERT_FILE"] = str(bundle)


_one_certificate_bundle()
# Gradio's Blocks() sets this in its own process when analytics are off (the suite's case): a worker that
# built one in a test then differed from the preloaded interpreter in a variable huggingface_hub reads at
# import, and every server it started after was refused the fork (tests/test_conftest.py)
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "True"
quiet_imports()  # this worker imports gradio as a hooked app does, writing no type stubs (tests/startup.py)


#: what the suite's servers import before they serve, imported once by the preloaded interpreter whose
#: forks they are (qbench/tune/servers/preloaded.py): the reference server (the suite starts ~100), its
#: model workloads with torch and transformers (the GPU script's dry runs start ~25 such servers), and
#: what `import gradio` imports before gradio's own modules (~1 s of its ~1.6 s; gradio itself reads
#: GRADIO_SERVER_PORT and others at import, so each app imports it), and `qbench run`'s modules (the GPU
#: script's steps and the benches run it as a process)
PRELOAD = ["reference_server.launch", "reference_server.workloads.models.vision",
           "reference_server.workloads.models.text", "reference_server.workloads.models.generation",
           "torch", "transformers", "transformers.models.vit.modeling_vit",
           "transformers.models.bert.modeling_bert", "transformers.models.gpt2.modeling_gpt2",
           "numpy", "pandas", "pyarrow", "fastapi", "starlette", "uvicorn", "pydantic", "pydantic_settings",
           "httpx", "huggingface_hub", "PIL.Image", "jsonschema", "jinja2", "mcp", "sse_starlette", "orjson",
           "safehttpx", "python_multipart", "fsspec", "yaml", "rich", "typer", "tomlkit", "anyio", "psutil",
           "aiohttp", "qbench.cli.app", "qbench.cli.run", "qbench.run.options", "qbench.run.pipeline",
           "qbench.run.console", "qbench.run.results.outcome", "qbench.tune.points.knobcheck"]
#: what a pytest worker imports before its first test, besides PRELOAD: the workers are forks of the
#: preloaded interpreter too (`-n N`: xdist starts each through `preloaded --stand-in`, which waits for it
#: to listen; QBENCH_PRELOADED=none starts them as before). `-n 6` of one file: 13.6 core-s against 18.4,
#: the preloaded interpreter's own start included (~2.5 s less a worker)
WORKER_PRELOAD = ["pytest", "execnet", "xdist", "hypothesis", "matplotlib.figure",
                  "matplotlib.backends.backend_agg", "openai", "gradio_client", "qbench.report.build",
                  "reference_server.testing", "typer.testing"]
_PRELOADED = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without workers) starts the preloaded interpreter, unless one is named
    already; its workers, and every process they start, find it in QBENCH_PRELOADED."""
    if hasattr(config, "workerinput") or os.environ.get(preloaded.ENV):
        return
    stack = contextlib.ExitStack()
    stack.enter_context(preloaded.started([*PRELOAD, *WORKER_PRELOAD], wait=False))
    config.stash[_PRELOADED] = stack
    tx = config.getoption("tx", None) or []
    if tx and all(spec == "popen" for spec in tx):  # `-n N`: N local workers, forked
        config.option.tx = [f"popen//python={sys.executable} -m {preloaded.__name__} --stand-in"] * len(tx)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PRELOADED in config.stash:
        config.stash[_PRELOADED].close()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist, the controller writes the rewritten test modules' bytecode once, before its workers
    start and each collects the suite (tests/rewrite_cache.py)."""
    config = session.config
    workers = getattr(config.option, "numprocesses", None)
    if not hasattr(config, "workerinput") and workers and config.getoption("assertmode") == "rewrite":
        precompile(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest test files first (tests/timing.py): the workers finish together."""
    order = slowest_first([item.nodeid for item in items], known_seconds())
    items[:] = [items[i] for i in order]


#: test files that share a session fixture's servers (tests/gradio_versions/conftest.py `release`: one app
#: process per Gradio release): one worker runs them, so the apps start once, not once per worker
TOGETHER = {"tests/gradio_versions/test_versions.py": "gradio-release-apps",
            "tests/gradio_versions/test_differential.py": "gradio-release-apps"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, a file a unit of work, except TOGETHER's files: one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Together(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            file = str(super()._split_scope(nodeid))
            return TOGETHER.get(file, file)

    return Together(config, log)


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    forked = preloaded.children_cpu_s()  # the preloaded interpreter's children this worker started
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + forked


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With QBENCH_TEST_CPU_LOG=FILE, each test's CPU and wall seconds appended to FILE (tests/timing.py)."""
    if not _CPU_LOG:
        yield
        return
    cpu, wall, started = _cpu_s(), time.monotonic(), time.time()
    yield
    with open(_CPU_LOG, "a", encoding="utf-8") as log:
        log.write(log_line(_cpu_s() - cpu, time.monotonic() - wall, item.nodeid, started))
