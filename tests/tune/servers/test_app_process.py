"""qbench.tune.servers.app_process: the user's own app, started per point."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from qbench.errors import ScenarioError
from qbench.tune.servers.app_process import app_launch_line, knob_env, render_command


def test_launch_mode_readiness_for_a_plain_http_server(tmp_path: Path) -> None:
    import httpx

    from qbench.tune.servers.app_process import launch_command

    command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp_path}"
    with launch_command(command, {}, work_dir=tmp_path / "w", any_status=True, ready_path="/nope") as handle:
        assert httpx.get(handle.base_url + "/", timeout=5).status_code == 200
        process = handle.process
    assert process is not None and process.poll() is not None  # the process group was torn down


def test_an_app_qbench_launched_restarts_on_its_own_port(tmp_path: Path) -> None:
    """`handle.restart()`: the app stopped and started again on the same port (a fresh process, what a
    restart in production gives: qbench capacity --app after a run leaves a metastable app collapsed),
    ready before it returns; the newest process is the one torn down at the end."""
    import httpx

    from qbench.tune.servers.app_process import launch_command

    command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp_path}"
    with launch_command(command, {}, work_dir=tmp_path / "w", any_status=True, ready_path="/") as handle:
        first, url = handle.process, handle.base_url
        assert handle.restart is not None and first is not None
        assert handle.restart() == url  # its port again
        second = handle.process
        assert second is not None and second.pid != first.pid and first.poll() is not None
        assert handle.base_url == url and httpx.get(url + "/", timeout=5).status_code == 200
    assert second.poll() is not None


def test_launch_template_and_environment() -> None:
    argv = render_command(
        "python app.py --port {port} --c {concurrency_limit}", {"concurrency_limit": 4}, 8123
    )
    assert argv == ["python", "app.py", "--port", "8123", "--c", "4"]
    with pytest.raises(ScenarioError, match="max_batch_size"):
        render_command("app --b {max_batch_size}", {"concurrency_limit": 4}, 1)
    env = knob_env({"concurrency_limit": 4, "load.users": 8}, 8123)
    assert env["QBENCH_CONCURRENCY_LIMIT"] == "4" and env["QBENCH_LOAD_USERS"] == "8"
    assert env["QBENCH_PORT"] == env["GRADIO_SERVER_PORT"] == "8123"


class _Taken:
    """A port someone else listens on (an HTTP server in this process), then free ones from the OS."""

    def __init__(self, times: int) -> None:
        import http.server
        import threading

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.times = times
        self.given: list[int] = []

    def __call__(self, span: int) -> int:
        from qbench.tune.servers.server_process import free_port_block

        port = int(self.server.server_address[1]) if len(self.given) < self.times else free_port_block(span)
        self.given.append(port)
        return port


def test_a_port_taken_before_the_app_binds_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port is free when qbench picks it; if another program takes it first, the app either fails to
    bind (its log says so) or a stranger answers on it: either way the app starts again on another."""
    import httpx

    from qbench.tune.servers import app_process

    taken = _Taken(times=1)
    monkeypatch.setattr(app_process, "free_port_block", taken)
    command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp_path}"
    try:
        with app_process.launch_command(command, {}, work_dir=tmp_path / "w", any_status=True) as handle:
            assert handle.base_url.endswith(f":{taken.given[-1]}") and len(taken.given) == 2
            assert httpx.get(handle.base_url + "/", timeout=5).status_code == 200
    finally:
        taken.server.shutdown()


def test_an_app_that_ended_before_the_owner_check_is_not_taken_for_the_stranger_on_its_port() -> None:
    """The race behind a failure on a quiet box: the app (a fork: started in milliseconds) could not bind the
    port a stranger held, ended and was reaped before qbench asked whose the listener was: the stranger is
    named (the port tried again), never taken for the app because the app could no longer be read."""
    import subprocess

    from qbench.tune.servers.app_process import PortTaken, _check_owner
    from qbench.tune.servers.server_process import ServerHandle

    taken = _Taken(times=1)
    ended = subprocess.Popen([sys.executable, "-c", ""], start_new_session=True)
    ended.wait()
    try:
        with pytest.raises(PortTaken, match=r"another program \(pid \d+\) answered"):
            _check_owner(ServerHandle(f"http://127.0.0.1:{taken(1)}", ended))
    finally:
        taken.server.shutdown()


def test_a_listener_the_app_left_in_its_session_is_the_apps_and_one_elsewhere_is_not() -> None:
    """A worker the app started owns the port for it, even once the app's own process has ended (its
    session is the app's: spawn starts each app in a new one); a process of another session does not."""
    import os
    import subprocess

    from qbench.tune.servers.app_process import _ours

    starts_a_worker = ("import subprocess, sys; worker = subprocess.Popen([sys.executable, '-c', "
                       "'import time; time.sleep(30)']); print(worker.pid, flush=True)")
    app = subprocess.Popen([sys.executable, "-c", starts_a_worker], stdout=subprocess.PIPE,
                           start_new_session=True)
    assert app.stdout is not None
    worker = int(app.stdout.readline())
    try:
        app.wait(timeout=30)
        assert _ours(app.pid, worker) and _ours(app.pid, app.pid)
        assert not _ours(app.pid, os.getpid())
    finally:
        os.kill(worker, 9)


def test_a_stranger_on_the_port_is_never_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An app slow to bind while a stranger answers on its port: never yielded; after three ports, a
    clear error."""
    from qbench.errors import ServerLaunchError
    from qbench.tune.servers import app_process

    taken = _Taken(times=3)
    monkeypatch.setattr(app_process, "free_port_block", taken)
    command = f"{sys.executable} -c 'import time; time.sleep(60)' {{port}}"
    try:
        with pytest.raises(ServerLaunchError, match=r"another program \(pid \d+\) answered"):
            with app_process.launch_command(command, {}, work_dir=tmp_path / "w", any_status=True):
                pytest.fail("yielded a server that is not the app")
    finally:
        taken.server.shutdown()
    assert len(taken.given) == app_process.PORT_TRIES


#: A stand-in for Gradio's launch(): it prints its local URL and answers, then passes (prints Gradio's
#: next line) or fails (exits as launch() does when HEAD / misses its 3 s) its own checks after 1 s.
LAUNCHING_APP = """
import http.server, sys, threading, time
handler = http.server.SimpleHTTPRequestHandler
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("* Running on local URL:  http://127.0.0.1:" + sys.argv[1])
time.sleep(1.0)
if sys.argv[2] == "fail":
    raise SystemExit("ValueError: When localhost is not accessible, a shareable link must be created.")
open(sys.argv[3], "w").close()
print("* To create a public link, set `share=True` in `launch()`.")
time.sleep(60)
"""


def test_a_gradio_app_is_ready_once_its_launch_checks_pass(tmp_path: Path) -> None:
    """No load reaches the app before its launch() has passed its own checks (the log says so: the
    child wrote its `checked` file just before that line); an app that fails them is a clear error
    that names them, never a server that stops answering in the middle of a run."""
    from qbench.errors import ServerLaunchError
    from qbench.tune.servers.app_process import launch_command

    script = tmp_path / "app.py"
    script.write_text(LAUNCHING_APP)
    checked = tmp_path / "checked"
    command = f"{sys.executable} {script} {{port}} pass {checked}"
    with launch_command(command, {}, work_dir=tmp_path / "w", any_status=True, ready_path="/"):
        assert checked.exists()
    with pytest.raises(ServerLaunchError, match="exited with code 1 in Gradio's own start-up checks"):
        with launch_command(f"{sys.executable} {script} {{port}} fail {checked}", {}, work_dir=tmp_path / "w",
                            any_status=True, ready_path="/"):
            pytest.fail("yielded an app that exited in its launch checks")


def test_a_bentoml_service_file_is_started_by_bentoml_serve(tmp_path: Path) -> None:
    """--app service.py of a BentoML service: `bentoml serve module:Service` in its folder, on the point's
    port; the last @bentoml.service class is the one served (those it depends on come first)."""
    app = tmp_path / "svc.py"
    app.write_text("import bentoml\n\n@bentoml.service\nclass Model: ...\n\n"
                   "@bentoml.service(workers=2)\nclass Front:\n    model = bentoml.depends(Model)\n")
    line = app_launch_line(app, "/env/bin/python")
    assert shlex.split(line) == ["/env/bin/python", "-m", "bentoml", "serve", "svc:Front", "--working-dir",
                                 str(tmp_path.resolve()), "--host", "127.0.0.1", "--port", "{port}"]
    plain = tmp_path / "app.py"
    plain.write_text("import gradio as gr\n")
    assert shlex.split(app_launch_line(plain, "py", ["--x"])) == ["py", str(plain), "--x"]
    app.write_text("import bentoml\n")
    with pytest.raises(ScenarioError, match="no class is decorated @bentoml.service"):
        app_launch_line(app)


def test_a_ray_serve_app_runs_itself_or_by_serve_run(tmp_path: Path) -> None:
    """--app app.py of a Ray Serve app: `python app.py` when the file calls serve.run itself, else
    `serve run module:app` on the last application it binds at module level (the hook sets the port)."""
    app = tmp_path / "rs.py"
    deployment = "from ray import serve\n\n@serve.deployment\nclass Model: ...\n\n"
    app.write_text(deployment + "first = Model.bind()\napp = Model.options(num_replicas=2).bind()\n")
    assert shlex.split(app_launch_line(app, "/env/bin/python")) == [
        "/env/bin/python", "-m", "ray.serve.scripts", "run", "rs:app", "--app-dir", str(tmp_path.resolve())]
    app.write_text(deployment + "app = Model.bind()\n"
                   "if __name__ == '__main__':\n    serve.run(app, blocking=True)\n")
    assert shlex.split(app_launch_line(app, "py", ["8000"])) == ["py", str(app), "8000"]
    app.write_text(deployment)
    with pytest.raises(ScenarioError, match="neither calls serve.run nor binds an application"):
        app_launch_line(app)


def test_a_torchserve_config_starts_qbenchs_launcher_in_its_env(tmp_path: Path) -> None:
    config = tmp_path / "config.properties"
    config.write_text("model_store=model_store\nload_models=batched\n")
    assert shlex.split(app_launch_line(config, "/ts/bin/python")) == [
        "/ts/bin/python", "-m", "qbench_torchserve_hook", str(config.resolve())]
