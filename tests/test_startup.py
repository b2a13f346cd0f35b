"""tests/startup.py: the apps the tests start themselves are forks of the preloaded interpreter where they can
be, with Popen's pipes either way."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from qbench.tune.servers import preloaded
from tests.startup import FOLDER, ForkedApp, start_app, with_startup

#: an app as the suite's are: a line on stdout once it is up, then it serves until its stdin closes
ECHO = """import os, sys
hook = getattr(sys.modules.get("sitecustomize"), "__file__", None) or "none"
print("READY", os.environ.get("APP_SETTING"), os.path.dirname(hook), flush=True)
for line in sys.stdin:
    print(line.strip().upper(), flush=True)
print("bye", file=sys.stderr, flush=True)
"""


def talk(tmp_path: Path, env: dict[str, str]) -> tuple[object, list[str], str]:
    """Start ECHO, send it one line, close its stdin: (the process, its stdout lines, its stderr)."""
    script = tmp_path / "echo_app.py"
    script.write_text(ECHO)
    with tempfile.TemporaryFile() as log:
        proc = start_app([sys.executable, str(script)], env=env, stderr=log.fileno(), cwd=tmp_path)
        assert proc.stdin is not None and proc.stdout is not None
        first = proc.stdout.readline().strip()
        proc.stdin.write("hello\n")
        proc.stdin.close()
        lines = [first, *(line.strip() for line in proc.stdout)]
        assert proc.wait(timeout=30) == 0
        log.seek(0)
        return proc, lines, log.read().decode()


@pytest.mark.skipif(not os.path.isabs(os.environ.get(preloaded.ENV, "")),
                    reason="needs the suite's preloaded interpreter (QBENCH_PRELOADED=none starts none)")
def test_an_app_of_this_interpreter_is_forked_with_its_pipes_and_the_hook(tmp_path: Path) -> None:
    preloaded.wait_listening(os.environ[preloaded.ENV], 120)  # tests/conftest.py starts it without waiting
    env = with_startup({**os.environ, "APP_SETTING": "on"})
    proc, lines, said = talk(tmp_path, env)
    assert isinstance(proc, ForkedApp), preloaded.refused
    assert lines == [f"READY on {FOLDER}", "HELLO"] and said == "bye\n"


def test_an_app_the_preloaded_interpreter_refuses_starts_as_a_process_all_the_same(tmp_path: Path) -> None:
    env = with_startup({**os.environ, "APP_SETTING": "off", "HF_HUB_OFFLINE": "1"})  # read at import: refused
    proc, lines, said = talk(tmp_path, env)
    assert not isinstance(proc, ForkedApp)
    assert lines == [f"READY off {FOLDER}", "HELLO"] and said == "bye\n"
