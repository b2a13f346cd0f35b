"""A preloaded interpreter that starts Python servers by forking: the imports paid once, each server a fork.
`started(modules)` runs one and names it in QBENCH_PRELOADED; `launch` (spawn's first try) forks a `python
[-u] -m|-c|SCRIPT` command there, or returns None where a fork could not run it as a new interpreter would."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import random
import runpy
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol

ENV = "QBENCH_PRELOADED"  # the socket of the preloaded interpreter that `launch` asks

#: environment variables read when an interpreter starts or a module is imported (Python's own, the
#: dynamic loader's, the hook's, torch's, transformers', the hub's, the BLAS libraries', matplotlib's,
#: the locale and temporary folder): a child whose value differs from the preloaded interpreter's would
#: see the old one, so it is started the usual way
IMPORT_TIME_ENV = ("PYTHON", "LD_", "QBENCH_HOOK", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS",
                   "TORCH", "PYTORCH", "CUDA", "NVIDIA", "OMP_", "MKL_", "OPENBLAS", "MPL", "XDG_", "LC_",
                   "LANG", "HOME", "TMPDIR", "TEMP", "TMP", "TZ")

#: of those, what is no setting read at import: PYTHON (a script's choice of interpreter: the variable
#: of bench/gpu_all.sh), PYTHONUNBUFFERED (a child sets up its own stdout and stderr for it) and
#: PYTHONBREAKPOINT (read at each breakpoint() call; ray.init() sets it in its own process, so a test
#: process that ran Ray once had every later start refused)
NOT_READ_AT_IMPORT = ("PYTHON", "PYTHONUNBUFFERED", "PYTHONBREAKPOINT")


def read_at_import(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` a fork would see with the preloaded interpreter's values (IMPORT_TIME_ENV
    less NOT_READ_AT_IMPORT; PYTHONPATH is compared folder by folder instead)."""
    return {k: v for k, v in env.items()
            if k.startswith(IMPORT_TIME_ENV) and k not in NOT_READ_AT_IMPORT and k != "PYTHONPATH"}


refused = ""  # why the preloaded interpreter last refused a command of this process ("": it did not)
_cpu_s = 0.0  # CPU seconds of the children this process started here and saw end (see children_cpu_s)


def children_cpu_s() -> float:
    """CPU seconds of the forked children this process saw end (its RUSAGE_CHILDREN lacks them)."""
    return _cpu_s


class Process(Protocol):
    """What a server's starter needs of its process: subprocess.Popen, or a Forked child."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | Any: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Forked:
    """A child of the preloaded interpreter, as Popen's methods see it (pid, poll, wait, signals)."""

    def __init__(self, args: list[str], pid: int, connection: socket.socket, read: bytes = b"") -> None:
        self.args, self.pid = args, pid
        self.returncode: int | None = None
        self._connection, self._read = connection, read

    def poll(self) -> int | None:
        if self.returncode is None:
            self._receive(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._receive(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _receive(self, timeout: float | None) -> None:
        """The exit line, if it comes within `timeout` (0: only if it is there)."""
        global _cpu_s
        self._connection.settimeout(timeout)
        try:
            while b"\n" not in self._read:
                chunk = self._connection.recv(4096)
                if not chunk:  # the preloaded interpreter ended first (it stops its children with it)
                    self._read += b'{"exit": -9, "cpu_s": 0}\n'
                    break
                self._read += chunk
        except (BlockingIOError, TimeoutError):
            return
        ended = json.loads(self._read.split(b"\n", 1)[0])
        self.returncode, _cpu_s = int(ended["exit"]), _cpu_s + float(ended["cpu_s"])
        self._connection.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._connection.close()


# ---------------------------------------------------------------- the caller's side


def launch(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | Path | None, stdout: int,
           new_session: bool = True, stdin: int | None = None, stderr: int | None = None) -> Forked | None:
    """`argv` forked from the preloaded interpreter QBENCH_PRELOADED names, with these descriptors (stdin:
    /dev/null, stderr: stdout, unless given); None when there is none or it refuses: start it as usual."""
    path, folder = os.environ.get(ENV), os.path.abspath(cwd or os.getcwd())
    if not path or command(argv, folder, env.get("PATH")) is None:
        return None
    request = {"argv": list(argv), "env": dict(env), "cwd": folder, "session": new_session}
    body = json.dumps(request).encode()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        with open(os.devnull, "rb") as null:
            fds = [null.fileno() if stdin is None else stdin, stdout, stdout if stderr is None else stderr]
            socket.send_fds(connection, [len(body).to_bytes(4, "big") + body], fds)
        first, rest = _line(connection)
        reply = json.loads(first)
    except (OSError, ValueError) as exc:
        reply = {"refused": f"{type(exc).__name__}: {exc}"}
    if "pid" not in reply:
        global refused
        refused = str(reply.get("refused", reply))
        connection.close()
        return None
    return Forked(list(argv), int(reply["pid"]), connection, rest)


def stand_in(argv: list[str], *, wait_s: float = 60.0) -> NoReturn:
    """Run `argv` as a fork of the preloaded interpreter, this process standing in for it (its stdio, its
    exit status, SIGINT/SIGTERM/SIGHUP passed on); exec it where there is none or it refuses."""
    wait_listening(os.environ.get(ENV, ""), wait_s)
    passed_on = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    signal.pthread_sigmask(signal.SIG_BLOCK, passed_on)  # held from the fork until they can be passed on
    child = launch(argv, env=os.environ, cwd=os.getcwd(), stdin=0, stdout=1, stderr=2)
    if child is None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, passed_on)
        os.execv(argv[0], argv)
    forward = child.send_signal
    for sig in passed_on:
        signal.signal(sig, lambda sig, _: forward(sig))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, passed_on)
    for fd in (0, 1):  # the child holds them: the end of its input or output is its own, not ours
        os.close(fd)
    code = child.wait()
    if code < 0:  # ended by a signal: end by it too
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def wait_listening(path: str, wait_s: float) -> None:
    """Wait up to `wait_s` for the preloaded interpreter at `path` to listen (one started with wait=False);
    at once where there is none ("", or its folder gone)."""
    deadline = time.monotonic() + wait_s
    while (path and not os.path.exists(path) and os.path.isdir(os.path.dirname(path))
           and time.monotonic() < deadline):
        time.sleep(0.05)


def _line(connection: socket.socket) -> tuple[bytes, bytes]:
    """The first line from `connection`, and what came after it (a child that ended at once: its exit)."""
    data = b""
    while b"\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            raise OSError("the preloaded interpreter closed the connection")
        data += chunk
    first, rest = data.split(b"\n", 1)
    return first, rest


def command(argv: Sequence[str], cwd: str, path: str | None) -> tuple[str, str, list[str], bool] | None:
    """(kind, target, arguments, unbuffered) of `python [-u] -m MODULE | -c CODE | SCRIPT ARGS...` run by
    this interpreter (from folder `cwd`, with PATH `path`); None for anything else."""
    if not argv or not _this_interpreter(argv[0], cwd, path):
        return None
    rest, unbuffered = list(argv[1:]), False
    if rest[:1] == ["-u"]:
        rest, unbuffered = rest[1:], True
    if len(rest) >= 2 and rest[0] in ("-m", "-c"):
        return rest[0], rest[1], rest[2:], unbuffered
    if rest and not rest[0].startswith("-"):
        return "script", rest[0], rest[1:], unbuffered
    return None


def _this_interpreter(program: str, cwd: str, path: str | None) -> bool:
    """Whether `program` is this interpreter: the same file in the same folder (one virtualenv)."""
    found = os.path.join(cwd, program) if os.sep in program else shutil.which(program, path=path)
    if not found:
        return False
    ours = sys.executable
    return _folder(found) == _folder(ours) and os.path.realpath(found) == os.path.realpath(ours)


def _folder(file: str) -> str:
    return os.path.realpath(os.path.dirname(os.path.abspath(file)))


@contextlib.contextmanager
def started(modules: Sequence[str], *, wait: bool = True) -> Iterator[str]:
    """A preloaded interpreter importing `modules`, named in QBENCH_PRELOADED until the block ends, then
    stopped with its children; yields its socket's path once it listens (`wait=False`: at once)."""
    with tempfile.TemporaryDirectory(prefix="qbench-preloaded-") as folder:
        path = os.path.join(folder, "socket")
        # its stdin a pipe whose end this process holds: a starter killed past its finally (SIGKILL, or a
        # SIGTERM it does not handle) closes it, and the preloaded interpreter stops with its children
        process = subprocess.Popen([sys.executable, "-m", __name__, path, *modules], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, start_new_session=True)
        assert process.stdout is not None and process.stdin is not None
        before = os.environ.get(ENV)
        try:
            if wait and process.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"the preloaded interpreter did not start (exit {process.wait()})")
            os.environ[ENV] = path
            yield path
        finally:
            if before is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = before
            process.stdin.close()
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()


# ---------------------------------------------------------------- the preloaded interpreter


class _Preloaded:
    """The accept-fork-reap loop: one request a connection, answered with the child's pid, then its exit."""

    def __init__(self, listener: socket.socket, environment: dict[str, str], sitecustomized: bool) -> None:
        self.listener, self.environment, self.sitecustomized = listener, environment, sitecustomized
        self.waiting: dict[int, socket.socket] = {}  # child pid -> its caller's connection
        self.wake_read, self.wake_write = os.pipe()

    def serve(self) -> NoReturn:
        for fd in (self.wake_read, self.wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self.wake_read, selectors.EVENT_READ)
        if stat.S_ISFIFO(os.fstat(0).st_mode):  # started() holds its other end: its end is ours too
            selector.register(0, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is self.listener:
                    self.accept()
                elif key.fileobj == 0:
                    if not os.read(0, 4096):
                        self.stop()
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_read, 4096)
                    self.reap()

    def accept(self) -> None:
        connection, _ = self.listener.accept()
        fds: list[int] = []
        try:
            connection.settimeout(10.0)
            request, fds = _request(connection)
            refused = self.refusal(request)
            if refused:
                connection.sendall(json.dumps({"refused": refused}).encode() + b"\n")
                connection.close()
                return
            sys.stdout.flush()
            sys.stderr.flush()
            settled, settling = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(settled)
                _become(request, fds, [self.listener, connection, *self.waiting.values()],
                        [self.wake_read, self.wake_write], settling)
            os.close(settling)
            with open(settled, "rb") as pipe:
                pipe.read()  # until the child closes its end: its own session, descriptors and folder set
            self.waiting[pid] = connection
            connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        except (OSError, ValueError):
            connection.close()
        finally:
            for fd in fds:
                os.close(fd)

    def refusal(self, request: dict[str, Any]) -> str:
        """Why this request is not forked ("" when it is); sets request["ran"] (the command as read) and
        request["added"] (the PYTHONPATH folders in front of this interpreter's)."""
        cwd = request["cwd"]
        if not os.path.isdir(cwd):
            return f"no folder {cwd}"
        request["ran"] = ran = command(request["argv"], cwd, request["env"].get("PATH"))
        if ran is None:
            return "not a python -m/-c/script command of this interpreter"
        env, own = request["env"], self.environment
        request["added"] = added = _in_front(env.get("PYTHONPATH", ""), own.get("PYTHONPATH", ""))
        if added is None or added and self.sitecustomized:
            return "PYTHONPATH differs: not folders in front of the preloaded interpreter's"
        first = os.path.dirname(os.path.join(cwd, ran[1])) if ran[0] == "script" else cwd
        shadowed = sorted({name for folder in (first, *added) for name in _shadowing(folder)})
        if shadowed:  # a module this interpreter imported from elsewhere: the child would import that one
            return f"modules of its own where this interpreter imported others: {', '.join(shadowed)}"
        theirs, ours = read_at_import(env), read_at_import(own)
        if not self.sitecustomized:  # the hook's variable is read by its sitecustomize, which the child runs
            theirs.pop("QBENCH_HOOK", None)
            ours.pop("QBENCH_HOOK", None)
        differ = sorted(k for k in {*theirs, *ours} if theirs.get(k) != ours.get(k))
        return f"environment read at import differs: {', '.join(differ)}" if differ else ""

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.waiting.pop(pid, None)
            if connection is not None:
                ended = {"exit": _returncode(status), "cpu_s": usage.ru_utime + usage.ru_stime}
                with contextlib.suppress(OSError):
                    connection.sendall(json.dumps(ended).encode() + b"\n")
                connection.close()

    def stop(self) -> NoReturn:
        """SIGTERM: the children's groups stopped (SIGTERM, then SIGKILL after 5 s), then exit."""
        for pid in self.waiting:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        for _ in range(50):
            self.reap()
            if not self.waiting:
                break
            threading.Event().wait(0.1)
        for pid in self.waiting:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        os._exit(0)


def _in_front(pythonpath: str, own: str) -> list[str] | None:
    """The folders `pythonpath` puts in front of `own` ([]: none); None when it does not end with `own`."""
    theirs, ours = [p for p in pythonpath.split(os.pathsep) if p], [p for p in own.split(os.pathsep) if p]
    if theirs[len(theirs) - len(ours):] != ours:
        return None
    return theirs[:len(theirs) - len(ours)]


def _shadowing(folder: str) -> list[str]:
    """Top-level modules imported here that `folder`, first on a child's path, holds other copies of."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    found = []
    for entry in entries:
        module = sys.modules.get(_module_name(folder, entry))
        if module is None or module.__name__ == "sitecustomize":
            continue
        paths = getattr(module, "__path__", None) or ()
        origin = getattr(module, "__file__", None) or next(iter(paths), None)
        here = os.path.realpath(os.path.join(folder, entry))
        if origin is None or not (os.path.realpath(origin) + os.sep).startswith(here + os.sep):
            found.append(module.__name__)
    return found


def _module_name(folder: str, entry: str) -> str:
    """The top-level module a folder's entry would be imported as ("" for none: data, metadata)."""
    if entry.endswith(".py"):
        name = entry[:-3]
    elif entry.endswith((".so", ".pyd")):
        name = entry.split(".", 1)[0]
    else:
        name = entry if os.path.isdir(os.path.join(folder, entry)) else ""
    return name if name.isidentifier() else ""


def _request(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    if len(fds) != 3 or len(data) < 4:
        for fd in fds:
            os.close(fd)
        raise ValueError("a request carries its length, its body and three file descriptors")
    size, data = int.from_bytes(data[:4], "big"), data[4:]
    while len(data) < size:
        chunk = connection.recv(1 << 16)
        if not chunk:
            raise ValueError("a request ended early")
        data += chunk
    return json.loads(data), fds


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)


def _become(request: dict[str, Any], fds: list[int], sockets: list[socket.socket], pipes: list[int],
            settling: int) -> NoReturn:
    """In the fork: become the requested program, then exit as an interpreter does."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sock in sockets:
            sock.close()
        for fd in pipes:
            os.close(fd)
        if request["session"]:
            os.setsid()
        moved = [os.dup(fd) for fd in fds]  # a received descriptor may be numbered 0-2 itself
        for target, fd in enumerate(moved):
            os.dup2(fd, target)
        for fd in {*fds, *moved} - {0, 1, 2}:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.close(settling)
        kind, target, args, unbuffered = request["ran"]  # what refusal() read of the command
        _fresh_stdio(unbuffered or bool(os.environ.get("PYTHONUNBUFFERED")))
        _reseed()
        _start_up(request["added"])
        code = _run(kind, target, args)
    except BaseException:  # noqa: BLE001 - the fork must never return into the loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(code)


def _fresh_stdio(unbuffered: bool) -> None:
    """sys.stdout and sys.stderr for the child's own descriptors, buffered as a new interpreter's are."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw = io.FileIO(fd, "wb", closefd=False)
        tty = raw.isatty()
        binary: Any = raw if unbuffered else io.BufferedWriter(raw)
        errors = "strict" if fd == 1 else "backslashreplace"
        stream = io.TextIOWrapper(binary, encoding="utf-8", errors=errors,
                                  line_buffering=tty or fd == 2, write_through=unbuffered)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)))
    sys.stdin = stdin
    setattr(sys, "__stdin__", stdin)  # noqa: B010 - typeshed's Final


def _reseed() -> None:
    """A fork shares its parent's random state: draw new seeds, as a new interpreter would."""
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _start_up(added: list[str]) -> None:
    """As an interpreter's start does: PYTHONPATH's added folders on sys.path, their sitecustomize run."""
    sys.path[1:1] = added
    if any(os.path.isfile(os.path.join(folder, "sitecustomize.py")) for folder in added):
        try:
            importlib.import_module("sitecustomize")
        except Exception as exc:  # noqa: BLE001 - as Python reports a failing sitecustomize, and goes on
            print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}", file=sys.stderr)


def _run(kind: str, target: str, args: list[str]) -> int:
    """Run the program as `python` would, then the interpreter's exit steps; its exit status."""
    interrupted, code = False, 0
    try:
        if kind == "-m":
            sys.argv, sys.path[0] = ["-m", *args], os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif kind == "-c":
            sys.argv, sys.path[0] = ["-c", *args], ""
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            sys.argv, sys.path[0] = [target, *args], os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001 - an uncaught exception: its traceback, status 1
        traceback.print_exc()
        code = 1
    _exit_steps()
    if interrupted:  # as CPython does: end by the signal, so the caller sees -SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _exit_status(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(Exception):
        print(value, file=sys.stderr)
    return 1


def _exit_steps() -> None:
    """What the interpreter does at its end: wait for non-daemon threads, run atexit, flush."""
    with contextlib.suppress(BaseException):
        getattr(threading, "_shutdown")()  # noqa: B009 - private: the join Py_Finalize does
    with contextlib.suppress(BaseException):
        getattr(atexit, "_run_exitfuncs")()  # noqa: B009
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def main(argv: list[str] | None = None) -> None:
    """`python -m qbench.tune.servers.preloaded SOCKET MODULE...`: import the modules, then fork a child per
    request on SOCKET (prints "ready" once it listens); `--stand-in COMMAND...`: `stand_in` that command."""
    import gc

    path, *modules = argv if argv is not None else sys.argv[1:]
    if path == "--stand-in":
        stand_in([sys.executable, *modules])
    environment = dict(os.environ)
    for module in modules:
        importlib.import_module(module)
    gc.collect()
    gc.freeze()  # the preloaded objects out of every collection: fewer pages copied into the children
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    print("ready", flush=True)
    _Preloaded(listener, environment, "sitecustomize" in sys.modules).serve()


if __name__ == "__main__":
    main()
