"""One cached virtualenv per Gradio release: `~/.cache/qbench/gradio-envs/<version>/`, built with uv on
first use and shared by every clone of the repository on the machine (a fresh clone's suite does not
build them again: ~45 s each on a 2-core box, and their first imports compile ~10 s of bytecode).

    python tests/gradio_versions/envs.py            # build (or reuse) every release in RELEASES
    python tests/gradio_versions/envs.py 4.44.1     # just one; `make gradio-envs` does all

An env is reused when its stamp file (`.qbench-env`) records the same requirement list and base
interpreter; changing the pins below rebuilds it.
Old releases need pins to install and import today (their own
requirements are open-ended and later majors of their dependencies broke them); each pin says why.
`QBENCH_GRADIO_ENVS` moves the cache folder (default: `$XDG_CACHE_HOME/qbench/gradio-envs`, that is
`~/.cache/qbench/gradio-envs`).

Imports only the standard library: it runs before anything is installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STAMP = ".qbench-env"

#: The releases verified by tests/gradio_versions (one per wire-protocol family still in use).
RELEASES = ("3.50.2", "4.44.1", "5.50.0")

#: Extra pins per major version, beyond `gradio==<version>`.
PINS: dict[str, tuple[str, ...]] = {
    # Starlette >= 0.40 (from fastapi 0.113) breaks their launch: the localhost self-check fails and
    # launch() raises "When localhost is not accessible, a shareable link must be created".
    "3": ("fastapi==0.112.4",),
    # The same fastapi pin; huggingface_hub 1.0 removed HfFolder, which gradio 4.x imports; pydantic
    # 2.11 emits `additionalProperties: true` in gr.Image's schema, which 4.x's /info generator
    # cannot read (TypeError: argument of type 'bool' is not iterable; launch fails as above).
    "4": ("fastapi==0.112.4", "huggingface_hub<1", "pydantic<2.11"),
}


class EnvError(RuntimeError):
    """The env could not be built (no uv, no network, a resolver conflict); the message says which."""


def envs_root() -> Path:
    if "QBENCH_GRADIO_ENVS" in os.environ:
        return Path(os.environ["QBENCH_GRADIO_ENVS"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "qbench" / "gradio-envs"


def requirements(version: str) -> list[str]:
    return [f"gradio=={version}", *PINS.get(version.split(".")[0], ())]


def env_python(version: str) -> Path:
    return envs_root() / version / "bin" / "python"


def ensure_env(version: str, python: str | None = None) -> Path:
    """The python of a ready env for `version`, building it first if needed. Raises EnvError."""
    return ensure_named_env(version, requirements(version), "gradio", python)


#: gradio_client 1.x, the last client line that speaks Gradio 3's `ws` protocol (its own env).
CLIENT_1X = "1.3.0"


def ensure_client_env(version: str = CLIENT_1X) -> Path:
    """The python of an env with only gradio_client==`version` (tests/gradio_versions/client_1x.py)."""
    return ensure_named_env(f"client-{version}", [f"gradio_client=={version}"], "gradio_client")


def ensure_named_env(name: str, reqs: list[str], module: str, python: str | None = None) -> Path:
    """`<envs_root()>/<name>/` with `reqs` installed and `module` importable, reused while its stamp
    records the same requirements and base interpreter."""
    env = envs_root() / name
    env.parent.mkdir(parents=True, exist_ok=True)
    with _locked(env.parent / f".{name}.lock"):  # several pytest workers (xdist) or sessions at once
        return _build_env(name, reqs, module, python)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` while the block runs (the second builder waits, then reuses)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_env(name: str, reqs: list[str], module: str, python: str | None) -> Path:
    env = envs_root() / name
    stamp = env / STAMP
    base = python or sys.executable
    # a venv's python is recorded as its base's; "bytecode on import": envs built before compiled it all
    recorded = "\n".join([*reqs, f"python {Path(base).resolve()}", "bytecode on import"])
    if stamp.exists() and stamp.read_text() == recorded and env_python(name).exists():
        return env_python(name)
    uv = _uv()
    if env.exists():
        shutil.rmtree(env)
    env.parent.mkdir(parents=True, exist_ok=True)
    _call([uv, "venv", "--quiet", "--python", base, str(env)], name)
    _call([uv, "pip", "install", "--quiet", "--python", str(env_python(name)), *reqs], name)
    _write_bytecode_on_import(env)
    _call([str(env_python(name)), "-c", f"import {module}"], name)  # its bytecode written once, here
    stamp.write_text(recorded)
    return env_python(name)


#: a .pth file's line runs when the env's python starts (site.py): its imports then write their bytecode,
#: whatever PYTHONDONTWRITEBYTECODE says (as on CI), into the env's own cache folder
BYTECODE_PTH = ("_qbench_bytecode.pth", "import sys; sys.dont_write_bytecode = False\n")


def _write_bytecode_on_import(env: Path) -> None:
    """Each module's bytecode written the first time an app of the env imports it. Without it every start
    of an app compiles Gradio's sources again (gradio 3.50.2's import: 6.5 s of CPU uncompiled, ~3 s
    compiled); compiling the whole env at install (`uv pip install --compile-bytecode`) cost ~75 s of CPU
    for the suite's eight envs, most of it modules no app imports (torch's, in TorchServe's env: 21 s)."""
    name, line = BYTECODE_PTH
    for site_packages in env.glob("lib/python*/site-packages"):
        (site_packages / name).write_text(line)


def network_env() -> dict[str, str]:
    """The environment with the CA bundle it had before tests/conftest.py gave the suite a one-certificate
    one (loopback needs none; an install from PyPI needs the real one)."""
    env = dict(os.environ)
    if "SSL_CERT_FILE_BEFORE_TESTS" in env:
        was = env.pop("SSL_CERT_FILE_BEFORE_TESTS")
        if was:
            env["SSL_CERT_FILE"] = was
        else:
            env.pop("SSL_CERT_FILE", None)
    if env.get("PIP_FIND_LINKS") and not env.get("UV_FIND_LINKS"):  # the machine's own wheels (a CPU torch)
        env["UV_FIND_LINKS"] = ",".join(env["PIP_FIND_LINKS"].split())
    return env


def _uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found is None:
        raise EnvError("uv is not installed (pip install uv; it is in qbench's `test` extra)")
    return found


def _call(cmd: list[str], version: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=network_env())
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise EnvError(f"gradio {version}: `{' '.join(cmd[:3])} ...` failed ({proc.returncode}):\n{tail}")


def main(argv: list[str]) -> int:
    failed = 0
    for version in argv or RELEASES:
        t0 = time.perf_counter()
        try:
            python = ensure_env(version)
        except EnvError as exc:
            print(f"FAILED {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"gradio {version}: {python} ({time.perf_counter() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
