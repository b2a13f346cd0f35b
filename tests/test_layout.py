"""The package layout: imports flow one way (cli -> tune -> run; report reads run and tune), no cycles.

Every `qbench` import is counted, lazy ones inside functions included, so a cycle cannot hide behind
an import moved into a function body.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.syntax import parse

ROOT = Path(__file__).resolve().parents[1] / "qbench"
SERVER = ROOT.parent / "reference_server"

# Which top-level parts of qbench each part may import (besides itself). The shells at the top
# (cli, demo, the package's lazy exports) may import anything.
ALLOWED = {
    "errors": set(),
    "run": {"errors", "__init__"},  # __init__ only for __version__ and lazy_names
    "tune": {"errors", "run", "__init__"},  # __init__: lazy_names, its face's __getattr__
    "report": {"errors", "run", "tune", "__init__"},  # tune: the typed readers of what a sweep wrote
    "analysis": {"errors", "run", "tune", "report"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, package: str = "qbench") -> set[str]:
    """The modules of `package` that `path` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(package):
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(package))
    return found


def _graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path, root.name) if m in modules and m != name}
    return graph


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_parts_import_only_downstream() -> None:
    wrong = [
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _part(module) in ALLOWED
        and _part(target) != _part(module)
        and _part(target) not in ALLOWED[_part(module)]
    ]
    assert not wrong, "imports against the flow:\n" + "\n".join(sorted(wrong))


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_module_import_cycles() -> None:
    graph = _graph()
    # The package's lazy public exports (qbench.__getattr__) are not a cycle at import time; every
    # other edge counts, lazy imports inside functions included.
    graph["qbench"] = set()
    graph["qbench.run"] = set()  # run/'s face: its names load on first use, like qbench's (test below)
    graph["qbench.tune"] = set()  # tune/'s face, the same
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# Each face and the stages that import that package through it only.
FACES = {"run": ("tune", "report", "analysis"), "tune": ("report", "analysis")}


@pytest.mark.parametrize("package", sorted(FACES))
def test_the_stages_above_import_a_package_through_its_face(package: str) -> None:
    """tune/, report/ and qbench.analysis import `from qbench.run import ...` only (run/__init__.py: FACE),
    report/ and qbench.analysis `from qbench.tune import ...` only, never a module inside, so a move
    inside a package changes its face alone."""
    inside = []
    for path in sorted(ROOT.rglob("*.py")):
        if _part(_module_name(path)) not in FACES[package]:
            continue
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            inside += [f"{where} {n}" for n in names if n.startswith(f"qbench.{package}.")]
    assert not inside, f"imports past {package}/'s face (add the name to qbench/{package}/__init__.py " \
        "FACE):\n" + "\n".join(inside)


@pytest.mark.parametrize("package", sorted(FACES))
def test_a_face_names_what_it_exports(package: str) -> None:
    """FACE (what loads at run time) and the TYPE_CHECKING imports (what mypy sees) list the same names,
    and each name is in the module FACE says."""
    import importlib

    face = importlib.import_module(f"qbench.{package}")
    typed: dict[str, set[str]] = {}
    for node in ast.walk(parse(ROOT / package / "__init__.py")):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"qbench.{package}."):
            typed.setdefault(node.module or "", set()).update(a.name for a in node.names)
    assert typed == {module: set(names) for module, names in face.FACE.items()}
    missing = [f"{m}.{n}" for m, names in face.FACE.items() for n in names
               if not hasattr(importlib.import_module(m), n)]
    assert not missing, f"FACE names what its module lacks: {missing}"
    module, names = next(iter(face.FACE.items()))
    assert getattr(face, names[0]) is getattr(importlib.import_module(module), names[0])
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        face.nothing  # noqa: B018


def test_the_reference_server_has_no_import_cycles_and_never_imports_qbench() -> None:
    """The server stands alone (qbench drives it over HTTP, as it drives any Gradio app); inside it,
    imports point one way (e.g. workloads/registry.py -> the workload modules -> workloads/base.py)."""
    cycle = _find_cycle(_graph(SERVER))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
    users = sorted(str(p.relative_to(SERVER.parent)) for p in SERVER.rglob("*.py") if _imports(p, "qbench"))
    assert not users, f"the reference server imports qbench in {users}"


# Inside run/, tune/ and reference_server/: each unit (a room, i.e. a subpackage, or a module at the top)
# imports only units before it in this list. That is the plan of docs/development.md ("The rooms").
UNITS = {
    "qbench.run": [
        "json_values", "clib",  # reading JSON back, the C library: for every room
        "records",  # the contract: RequestRecord, its files, its columns, spilled
        "control",  # the control plane
        "scenario", "protocols", "results", "load", "diagnose",  # the rooms, in data-flow order
        "summary_file", "console", "pipeline",  # shells: the run's folder, its console, the pipeline
        "target",  # what the target is (its framework) and a scenario drafted from its API (`qbench init`)
        "options",  # `qbench run` as a library call
        "soak",  # a run of hours, made through the shells
    ],
    "qbench.tune": [
        "knobs", "verdicts",  # what is tuned; what records say past their figures
        "values",  # what every later stage shares (a point's result, a probe, constraints, files)
        "ranking", "servers", "points",  # results -> a recommendation; the servers measured; one point
        "search", "capacity", "sweep", "plan",  # the commands' rooms, in the order they build on each other
    ],
    "reference_server": [
        "errors", "auth", "settings",
        "observe", "workloads", "io", "queue", "http",
        "testing", "launch", "selfmeasure", "__main__",
    ],
}


def _unit(package: str, module: str) -> str | None:
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1 :].split(".")[0]


@pytest.mark.parametrize("package", sorted(UNITS))
def test_rooms_import_only_the_units_before_them(package: str) -> None:
    order = UNITS[package]
    top = Path(__file__).resolve().parents[1] / package.split(".")[0]
    folder = top.parent / package.replace(".", "/")
    units = {p.stem for p in folder.glob("*.py")} | {p.parent.name for p in folder.glob("*/__init__.py")}
    units.discard("__init__")
    assert units == set(order), f"{package}: units not placed in UNITS: {sorted(units ^ set(order))}"
    wrong = []
    for module, targets in _graph(top).items():
        source = _unit(package, module)
        for target in targets:
            goal = _unit(package, target)
            if source is None or goal is None or goal == source:
                continue
            if order.index(goal) > order.index(source):
                wrong.append(f"{module} -> {target} ({source} may not import {goal})")
    assert not wrong, "imports against the rooms' order:\n" + "\n".join(sorted(wrong))


def test_tune_is_rooms_only() -> None:
    """tune/ has no module at its top besides its package face: every module lives in a room."""
    loose = sorted(p.name for p in (ROOT / "tune").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules at tune/'s top (put each in a room of UNITS['qbench.tune']): {loose}"


@pytest.mark.parametrize(
    "part",
    ["run", "tune", "report", "run/protocols", "run/scenario", "run/load", "run/results", "run/diagnose",
     "run/soak"],
)
def test_pipeline_folders_exist(part: str) -> None:
    assert (ROOT / part / "__init__.py").is_file()


MAX_FUNCTION_LINES = 60


def test_no_function_is_longer_than_a_screen() -> None:
    """Small functions: none over MAX_FUNCTION_LINES lines (signature and docstring included) in qbench/ or
    reference_server/ (bench/ scripts are exempt)."""
    long = []
    for root in (ROOT, SERVER):
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(parse(path)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        where = f"{path.relative_to(ROOT.parent)}:{node.lineno}"
                        long.append(f"{where} {node.name} ({lines} lines)")
    assert not long, "functions over 60 lines (split them):\n" + "\n".join(long)


def test_the_command_line_is_one_small_module_per_command() -> None:
    """qbench/cli/: no module over 250 lines, no command handler over 40, no options read back from
    `locals()` (each command's options are one dataclass: qbench/cli/app.py)."""
    big, long, wild = [], [], []
    for path in sorted((ROOT / "cli").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 250:
            big.append(path.name)
        if "locals()" in text:
            wild.append(path.name)
        for node in ast.walk(parse(text)):
            decorated = isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", "") == "command"
                for d in node.decorator_list)
            if decorated and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > 40:
                long.append(f"{path.name}:{node.name}")
    assert (big, long, wild) == ([], [], [])
