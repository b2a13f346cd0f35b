"""Run one load test: the pipeline behind `qbench run`, and the face the stages above run/ import.

    scenario/        what is sent: the scenario file, its payloads, schedule and traces
    protocols/       how one request goes on the wire (gradio, http, openai, mcp...)
    load/            how the load is sent: the generator, the mix, where it runs
    results/         what came back: summaries, the server's phases, steadiness, outcome
    diagnose/        what it means: where the limit was, in sentences
    soak/            over hours: the server's health sampled, drift judged
    records/         the flat contract with every later stage: RequestRecord, its files, its columns
    target/          what the target is: its framework, a scenario drafted from its API (`qbench init`)
    json_values.py   reading JSON back: tolerant value readers, Readable (a file's dataclass)
    clib.py          the C library through ctypes, loaded once per process
    control.py       the control plane: /config, /status, /admin/config, readiness
    summary_file.py  summary.json: its one writer and its one reader
    pipeline.py      run_scenario: a scenario -> a run directory
    options.py       `qbench run` as a library call
    console.py       the live progress line and the summary table

Layering and the face (FACE): docs/design/records-and-results.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qbench import lazy_names

# What the stages above run/ may use, by the module that defines it.
FACE: dict[str, tuple[str, ...]] = {
    "qbench.run.clib": ("libc",),
    "qbench.run.records.columns": ("Columns",),
    "qbench.run.control": ("read_gradio_mode", "read_gradio_version", "read_status"),
    "qbench.run.diagnose.app_errors": ("explain", "split_sessions"),
    "qbench.run.diagnose.limits": ("generator_lag", "host_cpus", "server_usage"),
    "qbench.run.diagnose.per_endpoint": ("diagnose_run",),
    "qbench.run.diagnose.finding": ("Finding",),
    "qbench.run.target.frameworks": ("OWN_CAPS", "Framework", "own_cap_lead", "read_framework"),
    "qbench.run.json_values": (
        "Readable",
        "ReadableOrNone",
        "json_dict",
        "json_int",
        "json_number",
        "json_text",
    ),
    "qbench.run.load.generator": ("LiveStats",),
    "qbench.run.load.mix": ("endpoint_slos", "mix_starts"),
    "qbench.run.protocols.gradio_api": ("DEFAULT_STREAM_EVERY_S",),
    "qbench.run.protocols.login": ("run_secrets",),
    "qbench.run.records.schema": (
        "DERIVED",
        "FIELD_NAMES",
        "RecordsFormatError",
        "RequestRecord",
        "read_records",
        "records_table",
    ),
    "qbench.run.results.alongside": ("alongside",),
    "qbench.run.results.batches": ("start_groups",),
    "qbench.run.results.device": ("DeviceStats", "device_stats", "with_gpu_busy"),
    "qbench.run.results.figures": ("FIGURES", "Figures"),
    "qbench.run.results.files": ("Writer", "new_folder"),
    "qbench.run.results.outcome": ("verdict",),
    "qbench.run.results.paired": ("PairedPhase", "Pairing", "pair_runs"),
    "qbench.run.results.run_info": ("RunInfo",),
    "qbench.run.results.steady": (
        "LiveTrend",
        "Steadiness",
        "Trend",
        "Z",
        "probe_seconds",
        "steadiness",
        "trend",
    ),
    "qbench.run.results.summary": (
        "SERVER_PHASES",
        "SloCheck",
        "Stats",
        "Summary",
        "e2e_breaches",
        "judge_bound",
        "slo_actual",
        "summarize",
    ),
    "qbench.run.results.words": (
        "PHASE_LABELS",
        "SERVER_PHASE_LABELS",
        "bottleneck_warnings",
        "chunk_line",
        "journey_line",
        "time_split",
        "token_line",
    ),
    "qbench.run.pipeline": ("run_scenario",),
    "qbench.run.scenario.schema": (
        "Load",
        "Scenario",
        "Slo",
        "load_scenario",
        "parse_scenario",
        "read_scenario_mapping",
        "resolve_paths",
        "with_overrides",
    ),
    "qbench.run.scenario.schedule": ("OpenPlan", "plan"),
    "qbench.run.soak.drift": ("Verdict",),
    "qbench.run.soak.health": ("HealthSample", "read_health"),
    "qbench.run.soak.command": ("SoakReport", "listening_pid", "read_report"),
    "qbench.run.summary_file": ("SummaryFile",),
}
_HOME = {name: module for module, names in FACE.items() for name in names}
__all__ = sorted(_HOME)

if TYPE_CHECKING:
    from qbench.run.clib import libc as libc
    from qbench.run.control import read_gradio_mode as read_gradio_mode
    from qbench.run.control import read_gradio_version as read_gradio_version
    from qbench.run.control import read_status as read_status
    from qbench.run.diagnose.app_errors import explain as explain
    from qbench.run.diagnose.app_errors import split_sessions as split_sessions
    from qbench.run.diagnose.finding import Finding as Finding
    from qbench.run.diagnose.limits import generator_lag as generator_lag
    from qbench.run.diagnose.limits import host_cpus as host_cpus
    from qbench.run.diagnose.limits import server_usage as server_usage
    from qbench.run.diagnose.per_endpoint import diagnose_run as diagnose_run
    from qbench.run.json_values import Readable as Readable
    from qbench.run.json_values import ReadableOrNone as ReadableOrNone
    from qbench.run.json_values import json_dict as json_dict
    from qbench.run.json_values import json_int as json_int
    from qbench.run.json_values import json_number as json_number
    from qbench.run.json_values import json_text as json_text
    from qbench.run.load.generator import LiveStats as LiveStats
    from qbench.run.load.mix import endpoint_slos as endpoint_slos
    from qbench.run.load.mix import mix_starts as mix_starts
    from qbench.run.pipeline import run_scenario as run_scenario
    from qbench.run.protocols.gradio_api import DEFAULT_STREAM_EVERY_S as DEFAULT_STREAM_EVERY_S
    from qbench.run.protocols.login import run_secrets as run_secrets
    from qbench.run.records.columns import Columns as Columns
    from qbench.run.records.schema import DERIVED as DERIVED
    from qbench.run.records.schema import FIELD_NAMES as FIELD_NAMES
    from qbench.run.records.schema import RecordsFormatError as RecordsFormatError
    from qbench.run.records.schema import RequestRecord as RequestRecord
    from qbench.run.records.schema import read_records as read_records
    from qbench.run.records.schema import records_table as records_table
    from qbench.run.results.alongside import alongside as alongside
    from qbench.run.results.batches import start_groups as start_groups
    from qbench.run.results.device import DeviceStats as DeviceStats
    from qbench.run.results.device import device_stats as device_stats
    from qbench.run.results.device import with_gpu_busy as with_gpu_busy
    from qbench.run.results.figures import FIGURES as FIGURES
    from qbench.run.results.figures import Figures as Figures
    from qbench.run.results.files import Writer as Writer
    from qbench.run.results.files import new_folder as new_folder
    from qbench.run.results.outcome import verdict as verdict
    from qbench.run.results.paired import PairedPhase as PairedPhase
    from qbench.run.results.paired import Pairing as Pairing
    from qbench.run.results.paired import pair_runs as pair_runs
    from qbench.run.results.run_info import RunInfo as RunInfo
    from qbench.run.results.steady import LiveTrend as LiveTrend
    from qbench.run.results.steady import Steadiness as Steadiness
    from qbench.run.results.steady import Trend as Trend
    from qbench.run.results.steady import Z as Z
    from qbench.run.results.steady import probe_seconds as probe_seconds
    from qbench.run.results.steady import steadiness as steadiness
    from qbench.run.results.steady import trend as trend
    from qbench.run.results.summary import SERVER_PHASES as SERVER_PHASES
    from qbench.run.results.summary import SloCheck as SloCheck
    from qbench.run.results.summary import Stats as Stats
    from qbench.run.results.summary import Summary as Summary
    from qbench.run.results.summary import e2e_breaches as e2e_breaches
    from qbench.run.results.summary import judge_bound as judge_bound
    from qbench.run.results.summary import slo_actual as slo_actual
    from qbench.run.results.summary import summarize as summarize
    from qbench.run.results.words import PHASE_LABELS as PHASE_LABELS
    from qbench.run.results.words import SERVER_PHASE_LABELS as SERVER_PHASE_LABELS
    from qbench.run.results.words import bottleneck_warnings as bottleneck_warnings
    from qbench.run.results.words import chunk_line as chunk_line
    from qbench.run.results.words import journey_line as journey_line
    from qbench.run.results.words import time_split as time_split
    from qbench.run.results.words import token_line as token_line
    from qbench.run.scenario.schedule import OpenPlan as OpenPlan
    from qbench.run.scenario.schedule import plan as plan
    from qbench.run.scenario.schema import Load as Load
    from qbench.run.scenario.schema import Scenario as Scenario
    from qbench.run.scenario.schema import Slo as Slo
    from qbench.run.scenario.schema import load_scenario as load_scenario
    from qbench.run.scenario.schema import parse_scenario as parse_scenario
    from qbench.run.scenario.schema import read_scenario_mapping as read_scenario_mapping
    from qbench.run.scenario.schema import resolve_paths as resolve_paths
    from qbench.run.scenario.schema import with_overrides as with_overrides
    from qbench.run.soak.command import SoakReport as SoakReport
    from qbench.run.soak.command import listening_pid as listening_pid
    from qbench.run.soak.command import read_report as read_report
    from qbench.run.soak.drift import Verdict as Verdict
    from qbench.run.soak.health import HealthSample as HealthSample
    from qbench.run.soak.health import read_health as read_health
    from qbench.run.summary_file import SummaryFile as SummaryFile
    from qbench.run.target.frameworks import OWN_CAPS as OWN_CAPS
    from qbench.run.target.frameworks import Framework as Framework
    from qbench.run.target.frameworks import own_cap_lead as own_cap_lead
    from qbench.run.target.frameworks import read_framework as read_framework


__getattr__ = lazy_names("qbench.run", _HOME)
