"""Output files fetched as users receive them: the reference server's and real Gradio's image outputs,
downloaded in the request's session, timed as their own phase; `fetch_outputs: false` turns it off."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from qbench.run.pipeline import run_scenario
from qbench.run.protocols.gradio_wire import output_files
from qbench.tune.servers.server_process import free_port
from reference_server.testing import RunningServer
from tests.run.conftest import scenario

Factory = Callable[..., AbstractContextManager[RunningServer]]
IMAGE = {"inputs": [{"image": {"width": 320, "height": 240, "format": "png"}}]}


def test_file_references_as_each_release_sends_them() -> None:
    data = [{"path": "/tmp/a.png", "url": "http://h/gradio_api/file=/tmp/a.png", "orig_name": "a.png",
             "meta": {"_type": "gradio.FileData"}},
            {"name": "/tmp/b.wav", "data": None, "is_file": True},  # 3.x
            {"path": "/tmp/c.png", "orig_name": "c.png"},  # 4.x without a url
            "text", 3,
            {"value": [{"path": "/d", "url": "/gradio_api/file=/d", "meta": {"_type": "gradio.FileData"}}]}]
    assert output_files(data, "http://h") == [
        "http://h/gradio_api/file=/tmp/a.png", "http://h/file=/tmp/b.wav", "http://h/file=/tmp/c.png",
        "/gradio_api/file=/d"]


@pytest.mark.parametrize("fetch", [True, False])
def test_reference_server_image_outputs_are_fetched(server_factory: Factory, tmp_path: Path,
                                                    fetch: bool) -> None:
    functions = [{"api_name": "gray", "workload": "imageop", "params": {"size": 128}}]
    spec = scenario(endpoint={"api_name": "gray"}, payload=IMAGE, fetch_outputs=fetch,
                    load={"requests": 6, "rate": 10, "timeout": 20})
    with server_factory(functions=functions) as server:
        result = run_scenario(spec, target=server.url, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    if not fetch:
        assert all(r.downloads == 0 and r.result_at_s is None and r.download_s is None for r in records)
        return
    for r in records:
        assert r.downloads == 1 and r.download_bytes > 1000  # a 128x128 PNG
        assert r.result_at_s is not None and r.completed_at_s is not None
        assert r.result_at_s <= r.completed_at_s
        assert r.latency_s is not None and r.latency_s >= (r.download_s or 0) + (r.service_s or 0)
    assert result.summary.phase("download_s").count == 6


@pytest.fixture(scope="module")
def image_app() -> Iterator[str]:
    """A real Gradio app as users write it: gr.Interface(f, gr.Image(), gr.Image())."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    import gradio as gr

    def mirror(image: Any) -> Any:
        return image[:, ::-1]

    demo = gr.Interface(mirror, gr.Image(), gr.Image(), api_name="predict")
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
    try:
        yield demo.local_url.rstrip("/")
    finally:
        demo.close()


def test_real_gradio_image_outputs_are_fetched(image_app: str, tmp_path: Path) -> None:
    spec = scenario(endpoint={"api_name": "predict"}, payload=IMAGE,
                    load={"requests": 4, "rate": 5, "timeout": 30})
    result = run_scenario(spec, target=image_app, out_dir=tmp_path / "run", live=False)
    records = result.records
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok][:3]
    assert all(r.downloads == 1 and r.download_bytes > 10_000 for r in records)  # the 320x240 output image
    assert all(r.bytes_received > r.download_bytes and r.download_s is not None for r in records)
