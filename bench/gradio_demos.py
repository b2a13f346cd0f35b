"""Does a new user's first run work on Gradio's own demos? `qbench init` + a short `qbench run` of each.

Takes the demos of Gradio's repository at run time (nothing of them is copied into qbench): from a
git mirror of gradio-app/gradio (`--gradio-git DIR`, at `--rev`, default HEAD) or from a folder of
demo folders (`--demos DIR`, each with its run.py). For every demo:

    skip       when it cannot run offline here: a package it imports is not installed, or it loads a
               model, calls a web API or reads an API key (the reason is written in the table)
    launch     `python demo/NAME/run.py` from the folder above demo/ (as Gradio's CI does), through
               qbench's startup hook (as `qbench sweep --app` launches an app: port, host,
               show_error=True), with Gradio's media_assets in GRADIO_ALLOWED_PATHS (as in Gradio's
               repository); a demo that does not answer GET /config within `--ready-s` is listed
               with the tail of its log
    per public endpoint (what Gradio's "Use via API" page lists):
               qbench init URL --api NAME -o NAME.yaml, then qbench run NAME.yaml with 2 users,
               no think time, `--duration` seconds (or `--requests` requests), drain 2 s, timeout 20 s

and writes one row per endpoint: requests sent, ok, errors by kind, events still running when the run
ended (not errors: the event takes longer than the short run), and, for a failure, its first message
and the explanation qbench printed. A demo runs in its own process (`--jobs` at once).

    .venv/bin/python bench/gradio_demos.py --gradio-git ../gradio.git --out /tmp/demos
    .venv/bin/python bench/gradio_demos.py --demos ../gradio/demo --only hello_world,calculator --out /tmp/d

The table goes to OUT/table.md and OUT/results.json; the exit status is 0 when at least `--goal`
(default 0.95) of the endpoints that ran are clean: no error AND at least one request completed
(an endpoint whose events were all still running at the end showed nothing working), leaving out
those that cannot have 0 errors on this machine whatever qbench sends (`apart_reason`: they need the
internet or ffmpeg, raise on purpose, or show a file that does not exist), which the table lists
apart with the reason. `--merge FILE` takes the rows of the demos not run this time from a finished
run's results.json.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qbench.errors import QbenchError  # noqa: E402

#: Source patterns of a demo that cannot run offline on a CPU-only machine, and why.
NEEDS = (
    (r"from_pretrained|pipeline\(|hf_hub_download|snapshot_download|load_model|torch\.hub|"
     r"\.load_state_dict|whisper|diffusers|spacy\.load|nltk\.download", "loads a model or data from the Hub"),
    (r"gr\.load\(|InferenceClient|Client\(\s*[\"']|gradio_client", "calls another app or a hosted model"),
    (r"requests\.(get|post)|urlopen|httpx\.|urllib\.request|openai|anthropic|pd\.read_csv\(\s*[\"']http",
     "calls a web API or downloads data"),
    (r"os\.environ\[|os\.getenv|environ\.get\(", "reads an API key or setting from the environment"),
    (r"\.mount_gradio_app|uvicorn\.run|FastAPI\(", "is mounted in its own web server (no run.py launch)"),
    (r"gr\.Server\(|mcp_server|gr\.api\(", "is an MCP or API-only server"),
)
OFFLINE_SIGNS = r"Name or service not known|Temporary failure in name resolution|resolve hostname"
RUN_SETS = {"load.users": 2, "load.think_time": 0, "load.ramp_up": 0, "load.warmup": 0,
            "load.timeout": 20, "load.drain": 2}


@dataclass
class Row:
    """One endpoint of one demo (or one demo that did not run: endpoint empty)."""

    demo: str
    endpoint: str = ""
    status: str = "ok"  # ok | failed | skipped | not started | init failed
    sent: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # error kind -> count (still running excluded)
    still_running: int = 0  # events the run's end closed (not errors)
    cause: str = ""  # why it was skipped or failed, in words
    apart: str = ""  # a failure that cannot reach 0 errors here, and why (counted apart from the goal)
    samples: dict[str, str] = field(default_factory=dict)  # error kind -> its first message, in one line
    explanation: list[str] = field(default_factory=list)  # what qbench's summary said about the failures


# ---------------------------------------------------------------- the demos


def demo_names(args: argparse.Namespace) -> list[str]:
    if args.demos:
        names = sorted(p.name for p in Path(args.demos).iterdir() if (p / "run.py").is_file())
    else:
        out = git(args, "ls-tree", "-d", "--name-only", f"{args.rev}:demo/")
        names = sorted(n for n in out.split() if n)
    if args.only:
        wanted = set(args.only.split(","))
        names = [n for n in names if n in wanted]
    return names


def git(args: argparse.Namespace, *argv: str) -> str:
    return subprocess.run(["git", f"--git-dir={args.gradio_git}", *argv], check=True, capture_output=True,
                          text=True).stdout


def extract(args: argparse.Namespace, name: str, into: Path) -> tuple[Path, list[str]]:
    """The demo's folder, copied under `into`, and the files the mirror lists but does not hold (a
    snapshot may leave out its largest blobs)."""
    folder = into / name
    shutil.rmtree(folder, ignore_errors=True)
    if args.demos:
        shutil.copytree(Path(args.demos) / name, folder)
        return folder, []
    return folder, checkout(args, f"demo/{name}", folder)


def checkout(args: argparse.Namespace, prefix: str, into: Path) -> list[str]:
    """The mirror's files under `prefix` written into `into`; the names of those it does not hold."""
    into.mkdir(parents=True, exist_ok=True)
    missing = []
    for line in git(args, "ls-tree", "-r", args.rev, f"{prefix}/").splitlines():
        meta, path = line.split("\t", 1)
        sha = meta.split()[2]
        blob = subprocess.run(["git", f"--git-dir={args.gradio_git}", "cat-file", "blob", sha],
                              capture_output=True, check=False)
        target = into / Path(path).relative_to(prefix)
        if blob.returncode != 0:
            missing.append(str(target.relative_to(into)))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
    return missing


def offline_problem(folder: Path) -> str | None:
    """Why this demo cannot run offline here (None: it should)."""
    run_py = folder / "run.py"
    if not run_py.is_file():
        return "no run.py"
    source = run_py.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"run.py does not parse ({exc.msg})"
    for module in sorted(_imports(tree)):
        local = (folder / f"{module}.py").exists() or (folder / module).is_dir()
        if not local and importlib.util.find_spec(module) is None:
            return f"needs the package {module!r} (not installed)"
    for pattern, why in NEEDS:
        if re.search(pattern, source):
            return why
    if "launch(" not in source:
        return "run.py does not launch an app"
    return None


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


# ---------------------------------------------------------------- one demo (in its own process)


def load_size(duration: float, requests: int | None) -> dict[str, Any]:
    """The run's size as overrides: `requests` requests (however long they take: a slow box's first
    calls may outlast a few seconds) or, without it, `duration` seconds."""
    if requests:
        return {"load.duration": None, "load.requests": requests}
    return {"load.duration": duration}


def size_text(size: dict[str, Any]) -> str:
    """'the 2.5 s run' or 'the run of 4 requests'."""
    requests = size.get("load.requests")
    return f"the run of {requests} requests" if requests else f"the {size['load.duration']:g} s run"


def run_demo(folder: Path, out: Path, size: dict[str, Any], ready_s: float) -> list[Row]:
    """Launch the demo, then init + run each public endpoint; one Row per endpoint."""
    from qbench.errors import ServerLaunchError
    from qbench.tune.servers.app_process import launch_command

    name = folder.name
    out.mkdir(parents=True, exist_ok=True)
    os.environ["GRADIO_ALLOWED_PATHS"] = gradio_media()
    cwd = launch_dir(folder)
    try:
        with launch_command(f"{sys.executable} {(folder / 'run.py').relative_to(cwd)}", {}, work_dir=out,
                            hook=True, cwd=cwd, ready_timeout_s=ready_s) as server:
            return endpoint_rows(name, server.base_url, out, size)
    except ServerLaunchError as exc:
        return [Row(name, status="not started", cause=_last_error(str(exc)))]


def launch_dir(folder: Path) -> Path:
    """Where the demo starts: the folder above demo/, as Gradio's own CI runs them (some read
    demo/<name>/... paths), or the demo's own folder, as a Space runs it, when the relative file names
    in its run.py are found there and not above (`return "new-sax-1.mp3"`)."""
    root = folder.parents[1]
    source = (folder / "run.py").read_text(encoding="utf-8", errors="replace")
    names = [n for n in re.findall(r"[\"']([\w./-]+\.[A-Za-z0-9]{2,4})[\"']", source)
             if not n.startswith(("/", "http"))]
    here = sum((folder / n).is_file() for n in names)
    above = sum((root / n).is_file() for n in names)
    return folder if here > above else root


def gradio_media() -> str:
    """The installed Gradio's media_assets folder: demos return its files, which Gradio serves only
    from the working directory or allowed_paths (Gradio's CI runs them where media_assets is under
    the working directory: its repository)."""
    spec = importlib.util.find_spec("gradio")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    return ",".join(str(Path(root) / "media_assets") for root in roots)


def endpoint_rows(name: str, url: str, out: Path, size: dict[str, Any]) -> list[Row]:
    from qbench.run.protocols.gradio_api import app_endpoints
    from qbench.run.target.draft import GradioTarget, read_target

    try:
        target = read_target(url)
    except QbenchError as exc:
        return [Row(name, status="init failed", cause=str(exc)[:300])]
    if not isinstance(target, GradioTarget):
        return [Row(name, status="skipped", cause="not a Gradio app")]
    public = [e.api_name for e in app_endpoints(target.config, target.info) if e.public]
    if not public:
        return [Row(name, status="skipped", cause="no public API endpoint")]
    return [endpoint_row(name, url, api, out, size) for api in public]


def endpoint_row(name: str, url: str, api: str, out: Path, size: dict[str, Any]) -> Row:
    """`qbench init URL --api API -o FILE` and a short `qbench run FILE`, as library calls."""
    from qbench.run.options import RunOptions, run_with_options
    from qbench.run.target.draft import init_scenario

    row = Row(name, api)
    path = out / f"{api}.yaml"
    try:
        result = init_scenario(url, api, command=f"qbench init {url} --api {api}", scenario_path=path)
    except QbenchError as exc:
        row.status, row.cause = "init failed", str(exc)[:300]
        return row
    if result.draft.fill_in:
        row.status = "init failed"
        row.cause = "; ".join(f"{i.what}: {i.suggestion.note}" for i in result.draft.inputs
                              if i.suggestion.fill_in)[:300]
        return row
    path.write_text(result.text.replace("THIS_FILE", str(path)), encoding="utf-8")
    sets = {**RUN_SETS, **size}
    try:
        done = run_with_options(RunOptions(path, out=out / f"run-{api}", sets=sets, live=False))
    except QbenchError as exc:
        row.status, row.cause = "failed", str(exc)[:300]
        return row
    summary = done.result.summary
    row.sent, row.ok = summary.sent, summary.completed_ok
    row.still_running = summary.errors_by_kind.get("deadline", 0)
    row.errors = {k: v for k, v in summary.errors_by_kind.items() if k != "deadline"}
    row.samples = {k: _message(summary.error_samples.get(k, ""))[:300] for k in row.errors}
    row.explanation = done.result.app_notes if row.errors else []
    return settle(row, size)


def settle(row: Row, size: dict[str, Any]) -> Row:
    """The row's status from its counts: clean ("ok") needs 0 errors AND at least one completed request
    (events still running at the end are not errors, but they show nothing worked)."""
    if row.errors:
        kind = next(iter(row.errors))
        row.status, row.cause = "failed", f"{kind}: {row.samples.get(kind, '')}"
    elif row.ok == 0:
        still = f" ({row.still_running} still running at its end)" if row.still_running else ""
        row.status, row.cause = "failed", f"no request completed in {size_text(size)}{still}"
    return row


def _message(sample: str) -> str:
    """An error sample in one line; Gradio's "Could not postprocess..." keeps its "Original error"."""
    original = re.search(r"Original error: (.*)", sample)
    first = " ".join(sample.split("\n\n")[0].split())
    return f"{first[:140]} ... Original error: {original.group(1)}" if original else " ".join(sample.split())


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln)]
    return (errors[-1] if errors else lines[-1] if lines else text)[:300]


# ---------------------------------------------------------------- the corpus


def one(args: argparse.Namespace, name: str) -> list[Row]:
    """One demo: classified, then run in a child process (its own imports, its own crash)."""
    try:
        folder, missing = extract(args, name, Path(args.out) / "work" / "root" / "demo")
    except (OSError, subprocess.CalledProcessError) as exc:
        return [Row(name, status="skipped", cause=f"cannot read it from the mirror ({exc})")]
    problem = offline_problem(folder)
    if problem is not None:
        return [Row(name, status="skipped", cause=problem)]
    rows = _child(args, folder)
    log = Path(args.out) / "work" / name / "server.log"
    offline = log.exists() and re.search(OFFLINE_SIGNS, log.read_text(errors="replace"))
    for row in rows:
        if row.status != "ok" and offline and "internet" not in row.cause:
            row.cause += " (the app reached for the internet: a host name did not resolve, see its log)"
    if missing:
        absent = f" (files absent from the mirror: {', '.join(missing[:3])})"
        for row in rows:
            if row.status != "ok":
                row.cause += absent
    source = (folder / "run.py").read_text(encoding="utf-8", errors="replace")
    for row in rows:
        if row.status in ("failed", "init failed") and row.endpoint:
            row.apart = apart_reason(row, source)
    return rows


def apart_reason(row: Row, source: str) -> str:
    """Why a failing endpoint cannot have 0 errors on this machine whatever qbench sends ("": it
    could): it needs the internet or ffmpeg, it raises on purpose, its function does not take its
    inputs, or it shows a file that is not there."""
    if any(re.search(OFFLINE_SIGNS, text) for text in (row.cause, *row.samples.values())):
        return "needs the internet"
    if "ffmpeg" in row.cause.lower():
        return "needs ffmpeg (not installed here)"
    for message in deliberate_raises(source):
        said = f": {message}" in row.cause or f'"{message}"' in row.cause
        if said and (len(message) >= 8 or row.cause.endswith(message)):
            return f"raises on purpose: the demo's code raises {message!r} whatever it is sent"
    declared = re.search(r"Invalid file type\. Please upload a file that is one of these formats: \[(.*?)\]",
                         row.cause)
    if declared and not re.search(r"'(\.|image|video|audio|text|file)", declared.group(1)):
        return f"declares file_types that no file has ({declared.group(1)})"
    arity = r"missing \d+ required positional argument|takes \d+ positional arguments? but"
    if re.search(arity, row.cause) or row.endpoint in mismatched_interfaces(source):
        return "its function takes more or fewer arguments than the event's inputs"
    denied = re.search(r"File not allowed: ([^\s\"]+?)\.?\"", row.cause)
    if denied and not Path(denied.group(1)).exists():
        return f"returns or shows a file that does not exist ({Path(denied.group(1)).name})"
    return ""


def mismatched_interfaces(source: str) -> set[str]:
    """The api_names of the `gr.Interface(fn, [inputs...])` in `source` whose function (a def of the
    file) has a different number of parameters from the list of inputs."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    found = set()
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "Interface" and len(call.args) >= 2):
            continue
        fn, inputs = call.args[0], call.args[1]
        if not (isinstance(fn, ast.Name) and fn.id in functions and isinstance(inputs, ast.List)):
            continue
        args = functions[fn.id].args
        if args.vararg is None and len(args.args) != len(inputs.elts):
            named = [k.value for k in call.keywords if k.arg == "api_name"]
            found.add(named[0].value if named and isinstance(named[0], ast.Constant) else "predict")
    return found


def deliberate_raises(source: str) -> list[str]:
    """The messages of the `raise X("...")` statements in `source` that its functions reach whatever
    their arguments: not under an `if` or `try` that reads a parameter (a counter in module state is
    no argument)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
            _raises(func.body if isinstance(func.body, list) else [], params, found)
    return found


def _raises(body: list[ast.stmt], params: set[str], found: list[str]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call) and stmt.exc.args:
            first = stmt.exc.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append(first.value)
        elif isinstance(stmt, ast.If):
            reads = {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}
            if not reads & params:
                _raises(stmt.body + stmt.orelse, params, found)


def _child(args: argparse.Namespace, folder: Path) -> list[Row]:
    result = Path(args.out) / "work" / folder.name / "rows.json"
    result.unlink(missing_ok=True)
    limit = args.ready_s + 120 + 60 * (args.duration if not args.requests else args.requests)
    sized = ["--requests", str(args.requests)] if args.requests else ["--duration", str(args.duration)]
    child = subprocess.Popen([sys.executable, __file__, "--child", str(folder), "--out", str(result.parent),
                              *sized, "--ready-s", str(args.ready_s)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        child.terminate()  # its SIGTERM handler stops the demo it launched
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
        return [Row(folder.name, status="failed", cause=f"the demo's runs took over {limit:.0f} s")]
    if not result.exists():
        return [Row(folder.name, status="failed", cause="the bench's child process died")]
    return [Row(**row) for row in json.loads(result.read_text())]


def table(rows: list[Row]) -> str:
    """The markdown result: the share of endpoints with 0 errors (of all that ran, and of those that
    can have 0 errors here), each failure with its cause, every demo that ran, and the demos not run
    with the reason."""
    ran, clean, apart = tally(rows)
    demos = sorted({r.demo for r in ran})
    still = sum(r.still_running for r in ran)
    counted = len(ran) - len(apart)
    lines = [f"{len(clean)} of {len(ran)} endpoints ({len(clean) / max(len(ran), 1):.1%}) of {len(demos)} "
             f"demos ran clean (0 errors, at least one request completed); {still} event(s) were still "
             "running at the end of their short run (not errors).", "",
             f"Leaving out the {len(apart)} endpoint(s) that cannot have 0 errors on this machine whatever "
             f"qbench sends (listed apart below, each with its reason): {len(clean)} of {counted} "
             f"({len(clean) / max(counted, 1):.1%}).", "",
             "Endpoints with errors or none completed, and their cause:", "",
             "| demo | endpoint | sent | ok | cause |", "|---|---|---|---|---|"]
    for r in ran:
        if not is_clean(r) and not r.apart:
            cause = _cell(f"{r.status}: {r.cause}" if r.status != "ok" else "no request completed")
            lines.append(f"| {r.demo} | /{r.endpoint} | {r.sent} | {r.ok} | {cause} |")
    lines += ["", "Endpoints listed apart (no input can make them run clean here):", "",
              "| demo | endpoint | sent | ok | why apart | cause |", "|---|---|---|---|---|---|"]
    for r in apart:
        lines.append(f"| {r.demo} | /{r.endpoint} | {r.sent} | {r.ok} | {_cell(r.apart)} | "
                     f"{_cell(r.status + ': ' + r.cause)} |")
    lines += ["", "Every demo that ran:", "",
              "| demo | endpoints | clean | still running at the end |", "|---|---|---|---|"]
    for demo in demos:
        mine = [r for r in ran if r.demo == demo]
        ok = sum(is_clean(r) for r in mine)
        lines.append(f"| {demo} | {len(mine)} | {ok} | {sum(r.still_running for r in mine) or ''} |")
    lines += ["", "Not run:", "", "| demo | why |", "|---|---|"]
    for r in rows:
        if r not in ran:
            lines.append(f"| {r.demo} | {_cell(r.status + ': ' + r.cause)} |")
    return "\n".join(lines) + "\n"


def tally(rows: list[Row]) -> tuple[list[Row], list[Row], list[Row]]:
    """The endpoints that ran, the clean ones (0 errors and at least one request completed: a row of
    an older results.json with none completed is not clean), and the failures listed apart."""
    ran = [r for r in rows if r.endpoint and r.status in ("ok", "failed", "init failed")]
    return ran, [r for r in ran if is_clean(r)], [r for r in ran if not is_clean(r) and r.apart]


def is_clean(row: Row) -> bool:
    """0 errors and at least one request completed (module docstring's "clean")."""
    return row.status == "ok" and row.ok > 0


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradio-git", help="a git mirror of gradio-app/gradio (its git directory)")
    parser.add_argument("--rev", default="HEAD", help="the revision whose demo/ folder to run")
    parser.add_argument("--demos", help="a folder of demo folders (each with a run.py)")
    parser.add_argument("--only", help="comma-separated demo names")
    parser.add_argument("--out", default="reports/gradio-demos", help="where the table and the runs go")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of load per endpoint")
    parser.add_argument("--requests", type=int, help="requests per endpoint instead of --duration seconds "
                        "(as many on a slow box, however long they take)")
    parser.add_argument("--ready-s", type=float, default=90.0, help="how long a demo may take to start")
    parser.add_argument("--jobs", type=int, default=2, help="demos at once")
    parser.add_argument("--goal", type=float, default=0.95, help="share of endpoints with 0 errors (exit 0)")
    parser.add_argument("--from-results", help="print the table of a finished run's results.json")
    parser.add_argument("--merge", help="a finished run's results.json whose rows stand for the demos "
                        "not run this time (re-run some with --only, keep the rest)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the launched demo on the way out
        mine = run_demo(Path(args.child), Path(args.out), load_size(args.duration, args.requests),
                        args.ready_s)
        (Path(args.out) / "rows.json").write_text(json.dumps([asdict(r) for r in mine], indent=1))
        return 0
    if args.from_results:  # the table again, from a finished run's results.json
        print(table([Row(**row) for row in json.loads(Path(args.from_results).read_text())]), end="")
        return 0
    if not args.demos and not args.gradio_git:
        parser.error("pass --gradio-git DIR or --demos DIR")
    names = demo_names(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.gradio_git:  # the repository's test files, which a demo started from its root may read
        checkout(args, "test/test_files", out / "work" / "root" / "test" / "test_files")
    rows: list[Row] = []
    started = time.monotonic()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for done in pool.map(lambda n: one(args, n), names):
            rows += done
            (out / "results.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))  # so far
            for r in done:
                print(f"{r.demo:32} {('/' + r.endpoint) if r.endpoint else '':28} {r.status:12} "
                      f"{r.sent:4} sent {r.ok:4} ok  {r.cause[:110]}", flush=True)
    if args.merge:
        kept = [Row(**row) for row in json.loads(Path(args.merge).read_text()) if row["demo"] not in names]
        rows = sorted(kept + rows, key=lambda r: r.demo)
    (out / "results.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    text = table(rows)
    (out / "table.md").write_text(text)
    print(text.splitlines()[0], f"({time.monotonic() - started:.0f} s)")
    ran, clean, apart = tally(rows)
    counted = len(ran) - len(apart)
    return 0 if counted and len(clean) >= args.goal * counted else 1


if __name__ == "__main__":
    sys.exit(main())
