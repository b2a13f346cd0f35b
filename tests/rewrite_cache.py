"""pytest's assertion rewriting, done once for all workers.

pytest rewrites each test module's asserts when it imports it and keeps the result in
`__pycache__/*-pytest-*.pyc`, but not where PYTHONDONTWRITEBYTECODE is set (this machine and CI set it):
then every xdist worker rewrites all of the suite's modules again at collection, ~9 s of CPU each
(2,800 tests in ~240 modules), 54 s of a six-worker run's CPU on two cores. The controller writes
those files once before the workers start (`precompile`, from tests/conftest.py's pytest_sessionstart);
the workers only read them (pytest reads a cached file whatever the setting, and checks its source's
hash first, so a stale one is rewritten, never used).

This reaches into pytest's own rewrite module (`_rewrite_test`, `_write_pyc`): where a pytest release
changes them, `precompile` does nothing and the workers rewrite as before (slower, never wrong).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def rewritten_modules(config: pytest.Config, root: Path = TESTS) -> list[Path]:
    """The files pytest rewrites on import: test modules (python_files patterns) and conftest.py files."""
    patterns = [str(p) for p in config.getini("python_files")]
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py") and (
            f == "conftest.py" or any(fnmatch.fnmatch(f, p) for p in patterns))]
    return found


def precompile(config: pytest.Config) -> int:
    """Write the rewritten bytecode of every module `rewritten_modules` lists that lacks a current one;
    the number written (0 where this pytest's rewrite module is not the one this was written for)."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )
        state = config.stash[assertstate_key]
    except (ImportError, KeyError):
        return 0
    written = 0
    for module in rewritten_modules(config):
        cache = get_cache_dir(module)
        pyc = cache / (module.name[:-3] + PYC_TAIL)
        try:
            if _read_pyc(module, pyc, state.trace) is not None:
                continue
            cache.mkdir(exist_ok=True)
            source_hash, code = _rewrite_test(module, config)
            written += bool(_write_pyc(state, code, source_hash, pyc))
        except (OSError, SyntaxError, TypeError):
            continue  # the worker's own import reports what is wrong with the module
    return written
