"""report.html in a real headless browser (Debian's chromium): every chart renders, nothing is blank,
and the page fits a phone's width.

Chromium is installed with apt-get when missing and the tests run as root; elsewhere they are skipped
with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from qbench.report.build import build_report
from tests.gradio_versions.envs import network_env

BROWSERS = ("chromium", "chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def _install_chromium() -> str | None:
    """apt-get install chromium (after apt-get update if the first try fails); None with the reason logged."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "chromium is missing and cannot be installed here (needs root and apt-get)"
    env = {**network_env(), "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "chromium"]
    for step in ([install], [["apt-get", "update", "-q"], install]):
        try:
            if all(subprocess.run(cmd, env=env, capture_output=True, timeout=900).returncode == 0
                   for cmd in step):
                return None
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"installing chromium failed: {exc}"
    return "apt-get install -y chromium failed (no package source reachable?)"


@pytest.fixture(scope="session")
def chromium() -> str:
    found = next((p for p in map(shutil.which, BROWSERS) if p), None)
    if found is None:
        reason = _install_chromium()
        found = next((p for p in map(shutil.which, BROWSERS) if p), None)
        if found is None:
            pytest.skip(reason or "chromium was installed but is not on PATH")
    return found


def _browse(chromium: str, html: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args,
           html.resolve().as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    return result


def _check_page(chromium: str, html: Path, tmp: Path, charts: int) -> None:
    page_height = 0
    for width, height in ((390, 844), (1200, 1000)):  # a phone, then a desktop
        dom = _browse(chromium, html, tmp, f"--window-size={width},{height}", "--dump-dom").stdout
        body = re.search(r"<body[^>]*>", dom)
        assert body, f"no <body> in the DOM dump:\n{dom[:500]}"
        assert f'data-charts="{charts}"' in body.group(0)
        assert f'data-charts-rendered="{charts}"' in body.group(0), "a chart did not decode"
        assert 'data-overflow="no"' in body.group(0), f"the page is wider than a {width}px window"
        assert len(re.findall(r'<img src="data:image/png;base64,', dom)) == charts
        page_height = int(re.search(r'data-height="(\d+)"', body.group(0)).group(1))  # type: ignore[union-attr]
    shot = tmp / "shot.png"
    _browse(chromium, html, tmp, f"--window-size=1200,{page_height}", f"--screenshot={shot}")
    with Image.open(shot) as img:
        pixels = np.asarray(img.convert("L"), dtype=float)
    assert pixels.std() > 20, "the screenshot is blank"
    # The charts fill most of the page, all the way down: rows with drawing on them in every tenth.
    busy = (pixels < 200).sum(axis=1) > 20
    assert busy.mean() > 0.3, "most of the page is empty"
    assert all(part.mean() > 0.05 for part in np.array_split(busy, 10)), "a part of the page is empty"


@pytest.mark.timeout(1200)
def test_run_report_renders_in_chromium(chromium: str, sim_run: Path, tmp_path: Path) -> None:
    files = build_report(sim_run)
    _check_page(chromium, files.html, tmp_path, len(files.charts))


@pytest.mark.timeout(1200)
def test_sweep_report_renders_in_chromium(chromium: str, sweep_dir: Path, tmp_path: Path) -> None:
    files = build_report(sweep_dir, tmp_path / "out")
    _check_page(chromium, files.html, tmp_path, len(files.charts))
