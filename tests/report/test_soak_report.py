"""A soak run's report (qbench.report.soak_charts): the "Over time" section and charts, from a fabricated
soak folder (a deterministic leak of 50 kB a request in health.jsonl beside simulated records)."""

from __future__ import annotations

from pathlib import Path

import orjson

from qbench.report.build import build_report
from qbench.run.soak.command import SoakOptions, judge_soak, write_report
from qbench.run.soak.health import HealthSample
from tests.report.report_synth import simulate, write_run


def soak_folder(path: Path) -> Path:
    records = simulate(n=600, rate_rps=20.0, warmup=0)
    write_run(path, records)
    samples = [HealthSample(t_s=t, at=1e9 + t, sent=20 * t, completed=20 * t, ok=20 * t, in_flight=0,
                            rss_bytes=100 * 2**20 + 50_000 * 20 * t, open_files=12, threads=6)
               for t in range(0, 30)]
    (path / "health.jsonl").write_bytes(b"".join(orjson.dumps(s.to_dict()) + b"\n" for s in samples))
    write_report(path, judge_soak(samples, records, SoakOptions(interval_s=1.0, warmup_s=5.0)))
    return path


def test_a_soak_report_has_its_over_time_section_and_charts(tmp_path: Path) -> None:
    files = build_report(soak_folder(tmp_path / "run"))
    names = {chart.name for chart in files.charts}
    assert {"soak_memory", "soak_resources", "soak_latency"} <= names
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "### Over time" in markdown and "server RSS: growing +47.7 MiB per 1,000 requests" in markdown
    assert "server threads: flat at 6" in markdown
    html = files.html.read_text(encoding="utf-8")
    assert 'id="over-time"' in html and "Over time: the server" in html


def test_a_plain_run_has_no_over_time_section(golden_run: Path, tmp_path: Path) -> None:
    files = build_report(golden_run, tmp_path / "out")
    assert not any(chart.name.startswith("soak_") for chart in files.charts)
    assert "Over time" not in files.markdown.read_text(encoding="utf-8")
