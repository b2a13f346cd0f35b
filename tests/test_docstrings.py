"""Docstrings stay true: every package's docstring maps its modules, and no docstring cites a file,
module or function that does not exist."""

from __future__ import annotations

import ast
import importlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.syntax import parse

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("qbench", "reference_server")
# Packages whose docstring is a one-line summary by design (their members are listed elsewhere).
UNMAPPED: set[str] = set()


def _packages() -> list[Path]:
    return sorted(p.parent for top in PACKAGES for p in (REPO / top).rglob("__init__.py"))


def _members(package: Path) -> list[str]:
    files = [p.name for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    folders = [p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(files + folders)


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize("package", [_rel(p) for p in _packages() if _rel(p) not in UNMAPPED])
def test_package_docstring_maps_every_module(package: str) -> None:
    doc = ast.get_docstring(parse(REPO / package / "__init__.py")) or ""
    missing = [m for m in _members(REPO / package) if not re.search(rf"(?<![\w/]){re.escape(m)}", doc)]
    assert not missing, f"{package}/__init__.py's docstring does not map: {', '.join(missing)}"


def _docstrings() -> Iterator[tuple[str, str]]:
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            tree = parse(path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc:
                        yield _rel(path), doc


_DOTTED = re.compile(r"\b((?:qbench|reference_server)(?:\.\w+)+)")
_FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:py|md|yaml|toml))\b")
# Files a run reads or writes, and placeholders: named in docstrings, never in the repository.
NAMED_ONLY = {"scenario.yaml", "server.yaml", "summary.md", "path/to/server.yaml", "directory/server.yaml",
              "gradio/queueing.py", "gradio/profiling.py",
              "model-config.yaml"}  # TorchServe's per-model settings file, inside a user's model archive


def _all_files() -> set[str]:
    """The repository's files, relative to it (not walking .venv and .git: tens of thousands of files
    every worker would stat at collection)."""
    found = set()
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in (".venv", ".git")]
        base = Path(folder).relative_to(REPO)
        found |= {(base / d).as_posix() for d in dirs} | {(base / f).as_posix() for f in files}
    return found


_ALL_FILES = _all_files()
_BASENAMES = {Path(p).name for p in _ALL_FILES}


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _stale(doc: str) -> list[str]:
    wrong = [d for d in _DOTTED.findall(doc) if not _resolves(d.rstrip("."))]
    for name in _FILE.findall(doc):
        if name in NAMED_ONLY:
            continue
        known = name in _ALL_FILES or any(f.endswith("/" + name) for f in _ALL_FILES) or (
            "/" not in name and name in _BASENAMES
        )
        if not known:
            wrong.append(name)
    return wrong


def test_no_docstring_cites_what_does_not_exist() -> None:
    stale = [f"{path}: {', '.join(found)}" for path, doc in _docstrings() if (found := _stale(doc))]
    assert not stale, "docstrings cite what does not exist:\n" + "\n".join(stale)
