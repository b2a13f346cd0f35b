"""tests/startup: the suite's own Gradio processes write no type stubs, and the environment's own
sitecustomize still runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.startup import FOLDER, with_startup


def fake_gradio(libs: Path) -> None:
    """A package shaped like Gradio 4.x+: its metaclass writes a `.pyi` per component class."""
    (libs / "gradio").mkdir(parents=True)
    (libs / "gradio" / "__init__.py").write_text("from gradio.component_meta import Meta\n"
                                                 "class Textbox(metaclass=Meta):\n    pass\n")
    (libs / "gradio" / "component_meta.py").write_text(
        "import pathlib\n"
        "def create_or_modify_pyi(cls, name, events):\n"
        "    pathlib.Path(__file__).with_name(name + '.pyi').write_text('stub')\n"
        "class Meta(type):\n"
        "    def __new__(mcs, name, bases, attrs):\n"
        "        made = super().__new__(mcs, name, bases, attrs)\n"
        "        create_or_modify_pyi(made, name, [])\n"
        "        return made\n")


def test_an_app_started_with_the_startup_folder_writes_no_stub_and_runs_the_envs_sitecustomize(
        tmp_path: Path) -> None:
    libs, own = tmp_path / "libs", tmp_path / "own"
    fake_gradio(libs)
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.ENV_OWN = True\n")
    env = with_startup({**os.environ, "PYTHONPATH": os.pathsep.join([str(own), str(libs)])})
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(FOLDER)
    code = "import builtins, gradio; print(type(gradio.Textbox).__name__, builtins.ENV_OWN)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Meta", "True"] and not (libs / "gradio" / "Textbox.pyi").exists()
    plain = {**os.environ, "PYTHONPATH": str(libs)}  # the same app as it runs elsewhere writes its stub
    subprocess.run([sys.executable, "-c", code.replace(", builtins.ENV_OWN", "")], env=plain, check=True)
    assert (libs / "gradio" / "Textbox.pyi").read_text() == "stub"


def test_gradio_imports_with_the_collector_paused_and_it_runs_again_after(tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    fake_gradio(libs)
    init = libs / "gradio" / "__init__.py"
    init.write_text("import builtins, gc\nbuiltins.SEEN = gc.isenabled()\n" + init.read_text())
    env = with_startup({**os.environ, "PYTHONPATH": str(libs)})
    code = "import builtins, gc, gradio; print(builtins.SEEN, gc.isenabled())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stderr
