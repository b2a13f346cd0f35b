"""qbench/tune/servers/preloaded.py: a child forked from the preloaded interpreter is what `python ...`
would have been (argv, folder, environment, output, exit status, signals, exit steps), and what it
cannot be is left to the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qbench.tune.servers import preloaded
from qbench.tune.servers.server_process import spawn, stop_process_group

BASE = "/qbench-test-base-path"  # the preloaded interpreter's own PYTHONPATH in this file


@pytest.fixture(scope="module")
def socket_path() -> Iterator[str]:
    """One preloaded interpreter for this file (json preloaded: cheap), named in QBENCH_PRELOADED."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", BASE)
        with preloaded.started(["json"]) as path:
            yield path


def forked(argv: list[str], log: Path, cwd: Path, **env: str) -> preloaded.Forked:
    with log.open("ab") as sink:
        child = preloaded.launch(argv, env={**os.environ, **env}, cwd=cwd, stdout=sink.fileno())
    assert child is not None, preloaded.refused
    return child


def test_a_command_runs_with_its_own_argv_folder_environment_and_output(socket_path: str,
                                                                        tmp_path: Path) -> None:
    code = ("import os, sys; print('argv', sys.argv, 'cwd', os.getcwd(), 'path0', repr(sys.path[0]));"
            "print('env', os.environ['QBENCH_TEST_VALUE']); print('to stderr', file=sys.stderr); sys.exit(3)")
    before = preloaded.children_cpu_s()
    child = forked([sys.executable, "-c", code, "one", "two"], tmp_path / "log", tmp_path,
                   QBENCH_TEST_VALUE="42")
    assert child.wait(timeout=30) == 3 and child.poll() == 3
    log = (tmp_path / "log").read_text()
    assert f"argv ['-c', 'one', 'two'] cwd {tmp_path} path0 ''" in log
    assert "env 42" in log and "to stderr" in log
    assert preloaded.children_cpu_s() > before  # its CPU came back with its exit status


def test_a_module_and_a_script_end_as_an_interpreter_ends(socket_path: str, tmp_path: Path) -> None:
    """`-m` and a script path, each with sys.argv and sys.path[0] as python sets them; at the end the
    non-daemon threads are joined before the atexit handlers run."""
    script = tmp_path / "app" / "main.py"
    script.parent.mkdir()
    script.write_text("import atexit, sys, threading, time\n"
                      "atexit.register(lambda: print('atexit ran', flush=True))\n"
                      "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
                      "print('script', sys.argv, sys.path[0] == sys.argv[0].rsplit('/', 1)[0])\n")
    child = forked([sys.executable, str(script), "x"], tmp_path / "script.log", tmp_path)
    assert child.wait(timeout=30) == 0
    log = (tmp_path / "script.log").read_text()
    assert f"script [{str(script)!r}, 'x'] True" in log
    assert log.index("thread done") < log.index("atexit ran")
    (tmp_path / "doc.json").write_text('{"b": 1, "a": 2}')
    argv = [sys.executable, "-u", "-m", "json.tool", "--sort-keys", "doc.json"]
    child = forked(argv, tmp_path / "module.log", tmp_path)
    assert child.wait(timeout=30) == 0 and '"a": 2,\n    "b": 1' in (tmp_path / "module.log").read_text()
    child = forked([sys.executable, "-m", "json.tool", "no-such-file"], tmp_path / "module.log", tmp_path)
    assert child.wait(timeout=30) != 0 and "no-such-file" in (tmp_path / "module.log").read_text()


def test_exit_statuses_are_popens(socket_path: str, tmp_path: Path) -> None:
    """An uncaught exception: 1 and its traceback; Ctrl-C's KeyboardInterrupt: ended by SIGINT (-2); a
    signal from outside: minus its number; the child has its own process group at once."""
    log = tmp_path / "log"
    assert forked([sys.executable, "-c", "raise ValueError('bad input')"], log, tmp_path).wait(30) == 1
    assert "ValueError: bad input" in log.read_text()
    interrupted = forked([sys.executable, "-c", "raise KeyboardInterrupt"], log, tmp_path)
    assert interrupted.wait(30) == -signal.SIGINT
    assert forked([sys.executable, "-c", "raise SystemExit('a message')"], log, tmp_path).wait(30) == 1
    assert "a message" in log.read_text()
    sleeper = forked([sys.executable, "-c", "import time; time.sleep(60)"], log, tmp_path)
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.1)
    os.killpg(sleeper.pid, signal.SIGTERM)  # its own group, already: as after Popen(start_new_session=True)
    assert sleeper.wait(timeout=30) == -signal.SIGTERM


def test_each_child_draws_its_own_random_numbers(socket_path: str, tmp_path: Path) -> None:
    code = "import random, numpy; print('draw', random.random(), numpy.random.random())"
    logs = [tmp_path / f"{i}.log" for i in range(2)]
    for log in logs:
        assert forked([sys.executable, "-c", code], log, tmp_path).wait(30) == 0
    first, second = (log.read_text() for log in logs)
    assert first.startswith("draw") and first != second


def test_what_it_cannot_run_is_left_to_the_caller(socket_path: str, tmp_path: Path) -> None:
    """Another program or virtualenv, other interpreter flags, an environment read at import that differs (not
    PYTHONUNBUFFERED: the child sets up its own output; not PYTHONBREAKPOINT: read when called) or a folder
    that is not there: None, and the caller starts it the usual way."""
    env, python = dict(os.environ), sys.executable
    with (tmp_path / "log").open("ab") as sink:
        def launch(argv: list[str], cwd: Path = tmp_path, **more: str) -> preloaded.Forked | None:
            return preloaded.launch(argv, env={**env, **more}, cwd=cwd, stdout=sink.fileno())

        assert launch(["/bin/sh", "-c", "true"]) is None
        other = tmp_path / "other-venv" / "bin"  # another virtualenv: a link to the same interpreter file
        other.mkdir(parents=True)
        (other / "python").symlink_to(os.path.realpath(python))
        assert launch([str(other / "python"), "-c", ""]) is None
        assert launch(["python-nowhere", "-c", ""]) is None
        assert launch([python, "-X", "importtime", "-c", ""]) is None
        assert launch([python, "-c", ""], PYTHONPATH="/x") is None and "PYTHONPATH" in preloaded.refused
        assert launch([python, "-c", ""], HF_HUB_OFFLINE="1") is None and "HF_HUB" in preloaded.refused
        assert launch([python, "-c", ""], cwd=tmp_path / "gone") is None and "gone" in preloaded.refused
        child = launch([python, "-c", ""], PYTHONUNBUFFERED="1")
        assert child is not None and child.wait(30) == 0
        # read at each breakpoint() call, not at import (ray.init() sets it in the process that calls it)
        hook = "import os, sys; sys.exit(os.environ['PYTHONBREAKPOINT'] != 'some.module.hook')"
        child = launch([python, "-c", hook], PYTHONBREAKPOINT="some.module.hook")
        assert child is not None and child.wait(30) == 0


def test_folders_in_front_on_pythonpath_are_on_sys_path_and_their_sitecustomize_runs(
        socket_path: str, tmp_path: Path) -> None:
    """As an interpreter's start does: PYTHONPATH's folders after sys.path[0], the sitecustomize among
    them run first (qbench's app hook is one, reading QBENCH_HOOK: free to differ from the preloaded
    interpreter's, which ran none)."""
    folder = tmp_path / "hook"
    folder.mkdir()
    startup = "import os\nprint('startup ran with', os.environ['QBENCH_HOOK'])\n"
    (folder / "sitecustomize.py").write_text(startup, encoding="utf-8")
    (folder / "helper_module_here.py").write_text("VALUE = 7\n")
    code = "import sys, helper_module_here; print('value', helper_module_here.VALUE, sys.path[1:3])"
    child = forked([sys.executable, "-c", code], tmp_path / "log", tmp_path,
                   PYTHONPATH=f"{folder}{os.pathsep}{BASE}", QBENCH_HOOK='{"knobs": {}}')
    assert child.wait(timeout=30) == 0
    log = (tmp_path / "log").read_text()
    assert """startup ran with {"knobs": {}}""" in log and f"value 7 [{str(folder)!r}, {BASE!r}]" in log
    assert log.index("startup ran") < log.index("value 7")


def test_spawn_forks_where_it_can_and_starts_a_process_where_not(socket_path: str, tmp_path: Path) -> None:
    child = spawn([sys.executable, "-c", "print('forked')"], env=None, log_path=tmp_path / "a.log")
    assert isinstance(child, preloaded.Forked) and child.wait(30) == 0
    other = spawn([sys.executable, "-c", "print('started')"], env={"PYTHONPATH": str(tmp_path)},
                  log_path=tmp_path / "b.log")
    assert isinstance(other, subprocess.Popen) and other.wait(30) == 0
    assert "forked" in (tmp_path / "a.log").read_text() and "started" in (tmp_path / "b.log").read_text()
    sleeper = spawn([sys.executable, "-c", "import time; time.sleep(60)"], env=None, log_path=None)
    stop_process_group(sleeper)
    assert sleeper.poll() == -signal.SIGTERM


def test_stopping_it_stops_its_children(tmp_path: Path) -> None:
    """Its children end with it (SIGTERM to each group), and their callers hear how they ended."""
    with preloaded.started(["json"]):
        child = forked([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log", tmp_path)
    assert child.wait(timeout=30) == -signal.SIGTERM


def test_a_starter_killed_past_its_cleanup_takes_the_preloaded_interpreter_and_its_children_along(
        tmp_path: Path) -> None:
    """A starter SIGKILLed (or ended by a SIGTERM it does not handle: pytest's controller) runs no
    `finally`; the preloaded interpreter reads the end of the pipe it held and stops, its children too."""
    starter = ("import sys, time; from qbench.tune.servers import preloaded\n"
               "with preloaded.started(['json']):\n"
               "    child = preloaded.launch([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
               "                             env=dict(__import__('os').environ), cwd=None, stdout=1)\n"
               "    print(preloaded.os.getpid(), child.pid, flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    _, child = map(int, process.stdout.readline().split())
    zygote = int(subprocess.check_output(["ps", "-o", "ppid=", "-p", str(child)], text=True))
    process.kill()
    process.wait()
    deadline = time.monotonic() + 30
    while any(map(running, (zygote, child))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(zygote) and not running(child)
    process.stdout.close()


def running(pid: int) -> bool:
    """Whether `pid` runs (an ended process not yet reaped by its new parent is a zombie: state Z)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_with_none_there_processes_start_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QBENCH_PRELOADED naming no socket (`QBENCH_PRELOADED=none make test`): every process is started."""
    monkeypatch.setenv(preloaded.ENV, "none")
    child = spawn([sys.executable, "-c", "print('started')"], env=None, log_path=tmp_path / "log")
    assert isinstance(child, subprocess.Popen) and child.wait(30) == 0
    assert "started" in (tmp_path / "log").read_text() and "FileNotFoundError" in preloaded.refused


def test_a_folder_with_its_own_copy_of_a_preloaded_module_is_left_to_the_caller(
        socket_path: str, tmp_path: Path) -> None:
    """A child would import a folder's own json.py (first on its path: its folder, a script's, a
    PYTHONPATH folder in front) where the fork has the preloaded json; the project's own folder, whose
    qbench is the one preloaded, forks."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "json.py").write_text("MINE = True\n", encoding="utf-8")
    (mine / "app.py").write_text("import json\nprint(json.MINE)\n", encoding="utf-8")
    env, python = dict(os.environ), sys.executable
    with (tmp_path / "log").open("ab") as sink:
        def launch(argv: list[str], cwd: Path = tmp_path, **more: str) -> preloaded.Forked | None:
            return preloaded.launch(argv, env={**env, **more}, cwd=cwd, stdout=sink.fileno())

        assert launch([python, "-c", "import json"], cwd=mine) is None and "json" in preloaded.refused
        assert launch([python, str(mine / "app.py")]) is None
        assert launch([python, "-c", "import json"], PYTHONPATH=f"{mine}{os.pathsep}{BASE}") is None
        root = Path(preloaded.__file__).parents[3]
        child = launch([python, "-c", "import qbench"], cwd=root)
        assert child is not None and child.wait(30) == 0


def test_a_stand_in_runs_its_command_forked_on_its_own_pipes(socket_path: str) -> None:
    """`preloaded --stand-in CMD` (what xdist starts for each of the suite's workers): CMD forked, reading
    and writing the stand-in's own pipes, its exit status the stand-in's, SIGTERM passed on; with no
    preloaded interpreter named, the stand-in becomes CMD."""
    code = ("import os, sys; line = sys.stdin.readline(); print('err', file=sys.stderr);"
            "print(line.strip(), os.getppid(), flush=True); line = sys.stdin.readline(); sys.exit(int(line))")
    stand_in = [sys.executable, "-m", preloaded.__name__, "--stand-in", "-u", "-c", code]
    pipe = subprocess.PIPE
    process = subprocess.Popen(stand_in, stdin=pipe, stdout=pipe, stderr=pipe, text=True)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write("hello\n")
    process.stdin.flush()
    said, parent = process.stdout.readline().split()
    assert said == "hello" and socket_path in Path(f"/proc/{parent}/cmdline").read_text()  # a fork of it
    process.stdin.write("5\n")
    process.stdin.close()
    assert process.wait(timeout=30) == 5 and process.stderr.read() == "err\n"
    process.stdout.close()
    process.stderr.close()

    sleeper = subprocess.Popen([*stand_in[:-1], "import time; print('up', flush=True); time.sleep(60)"],
                               stdout=subprocess.PIPE, text=True)
    assert sleeper.stdout is not None and sleeper.stdout.readline() == "up\n"
    sleeper.terminate()
    assert sleeper.wait(timeout=30) == -signal.SIGTERM  # the child ended by it, and the stand-in too
    sleeper.stdout.close()

    env = {k: v for k, v in os.environ.items() if k != preloaded.ENV}
    alone = subprocess.run(stand_in, input="hi\n0\n", capture_output=True, text=True, env=env, timeout=60)
    assert alone.returncode == 0 and alone.stdout.split() == ["hi", str(os.getpid())]  # CMD itself
