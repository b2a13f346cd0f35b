"""The README and docs/ are executed: every command in their ```sh blocks runs somewhere in the test suite.

Each command is either run here at reduced size (`RUN_HERE`, against reference servers started by
the fixtures), or listed in `ELSEWHERE` with the test that runs it (and a fragment of the command
that test's source must contain), or in `NOT_RUN` with the reason (a GPU install, the suite itself).
A command added to the README without an entry fails `test_every_readme_command_is_covered`, naming
the command and where to add it; an entry whose command left the README fails too.

The pages themselves: the README stays short (at most README_MAX_LINES lines: the detail lives in
docs/, measured tables in bench/RESULTS.md), every relative link of README.md, docs/ and bench/ resolves
to a file and heading, every docs/ page is reachable from README.md or docs/README.md, and user pages
hold no worklog (to-do lists go to docs/development.md).
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
import webbrowser
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from qbench.cli import app
from qbench.run.records.schema import read_records
from reference_server.settings import (
    ServerSettings,
    load_preset,
    parse_settings,
    preset_path,
    read_settings_file,
)
from reference_server.testing import RunningServer, serve_in_thread
from tests.syntax import parse

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def documents() -> list[Path]:
    """The README and every page under docs/: the files whose commands the tests must run."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def linked_documents() -> list[Path]:
    """Every page whose relative links must resolve: the README, docs/ and bench/'s markdown."""
    return [*documents(), *sorted((ROOT / "bench").glob("*.md"))]


REDUCED_RUN = ["--set", "load.duration=2", "--set", "load.warmup=0", "--no-live"]


def readme_commands(text: str | None = None) -> list[str]:
    """Every command line of the ```sh blocks of the README and docs/ (or of `text`): continuation
    lines joined, comments and a trailing `&` dropped, whitespace collapsed."""
    if text is None:
        text = "\n".join(path.read_text(encoding="utf-8") for path in documents())
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip().removesuffix("&").strip()
            if line:
                commands.append(" ".join(line.split()))
    return commands


# ---------------------------------------------------------------- the table

#: Commands run by the tests in this file (at reduced size; see each test).
IMAGE = "test_quick_start_image_run_and_its_reports"
RUN_HERE = {
    "qbench serve --preset image": IMAGE,
    "qbench run scenarios/image.yaml --target http://127.0.0.1:7860": IMAGE,
    "qbench report reports/<run-id>": IMAGE,
    "qbench report reports/<run-id> --out /tmp/r --open": IMAGE,
    "qbench run scenarios/burst.yaml --set load.burst=200 --set slo.max_latency_s=3":
        "test_quick_start_burst",
    "make demo": "test_make_demo",
    "qbench serve --preset sleep --port 7860": "test_the_serve_commands",
    "qbench serve --config my_server.yaml --max-threads 8 --default-concurrency-limit 2 --max-size 32":
        "test_the_serve_commands",
}

GRADIO_REPLICAS = "tests/tune/servers/test_balancer.py::test_real_gradio_replicas_with_and_without_affinity"
IMAGE_REPLICAS = ("tests/tune/servers/test_balancer.py::"
                  "test_the_image_scenario_behind_two_replicas_has_no_errors")

#: Commands another test runs: (test id, a fragment that test's source must contain: the command's own
#: words, or the reduction it applies).
ELSEWHERE: dict[str, list[tuple[str, str]]] = {
    # docs/tuning-your-app.md: an unmodified app swept through the startup hook (two points each)
    "qbench sweep examples/my_app.yaml --app examples/my_app.py --grid concurrency_limit=1,2,4,8": [
        ("tests/docs/test_readme_app.py::test_the_tune_your_app_commands_run",
         "--grid concurrency_limit=1,4")],
    "qbench sweep examples/my_app.yaml --app examples/my_app.py --python .venv/bin/python "
    "--grid concurrency_limit=2,4 --set load.users=12 -- --delay 0.1": [
        ("tests/docs/test_readme_app.py::test_the_tune_your_app_commands_run", "-- --delay 0.1")],
    'qbench sweep examples/my_app.yaml --launch "python examples/my_app.py --delay 0.1" '
    "--grid concurrency_limit=2,4": [
        ("tests/docs/test_readme_app.py::test_the_tune_your_app_commands_run", "--launch")],
    # docs/tuning.md: launch() knobs on an SSR app; docs/traffic-mixes-and-journeys.md: page visits join
    "qbench sweep examples/page/page_visits.yaml --app examples/page/ssr_app.py --grid num_workers=0,2": [
        ("tests/tune/e2e/test_sweep_ssr.py::test_a_num_workers_sweep_on_an_ssr_app_ranks_points_with_the_knob_proven",
         "examples/page/page_visits.yaml")],
    "qbench run examples/page/chat_and_page.yaml --target http://127.0.0.1:7860": [
        ("tests/run/protocols/test_page.py::test_the_docs_chat_and_page_run_compares_the_chat_before_and_after",
         "examples/page/chat_and_page.yaml")],
    # docs/capacity.md: the measured table's commands
    "qbench serve --config examples/capacity/limit4_server.yaml": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "read_settings_file")],
    "qbench capacity examples/capacity/limit4.yaml --target http://127.0.0.1:7860": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "REDUCED_CAPACITY")],
    "qbench run examples/capacity/limit4.yaml --target http://127.0.0.1:7860"
    " --set load.rate=<rate> --set load.duration=60": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "REDUCED_RUN")],
    "qbench capacity examples/capacity_sleep.yaml --target http://127.0.0.1:7860": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "REDUCED_CAPACITY")],
    "qbench run examples/capacity_sleep.yaml --target http://127.0.0.1:7860"
    " --set load.rate=<rate> --set load.duration=60": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "REDUCED_RUN")],
    "python examples/capacity/gradio_sleep_app.py --port 7860": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "launch_command")],
    "qbench capacity examples/capacity/gradio_sleep.yaml --target http://127.0.0.1:7860": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "REDUCED_CAPACITY")],
    "qbench run examples/capacity/gradio_sleep.yaml --target http://127.0.0.1:7860"
    " --set load.rate=<rate> --set load.duration=60": [
        ("tests/docs/test_docs_capacity.py::test_the_measurement_commands_run", "REDUCED_RUN")],
    "python examples/capacity/gradio_chat_app.py --port 7860": [
        ("tests/docs/test_docs_capacity.py::test_the_chat_app_commands_run", "launch_command")],
    "python examples/capacity/gradio_chat_app.py --keep-history --port 7860": [
        ("tests/docs/test_docs_capacity.py::test_the_chat_app_commands_run", "--keep-history")],
    "qbench capacity examples/capacity/gradio_chat.yaml --target http://127.0.0.1:7860": [
        ("tests/docs/test_docs_capacity.py::test_the_chat_app_commands_run", "REDUCED_CAPACITY")],
    "qbench run examples/capacity/gradio_chat.yaml --target http://127.0.0.1:7860"
    " --set load.rate=<rate> --set load.duration=60": [
        ("tests/docs/test_docs_capacity.py::test_the_chat_app_commands_run", "REDUCED_RUN")],
    # docs/soak.md: a leaking reference server soaked (8 s instead of 300), its report, an app via --app
    "qbench serve --config examples/soak/leak_server.yaml": [
        ("tests/run/soak/test_command.py::test_the_docs_soak_commands_run",
         "examples/soak/leak_server.yaml")],
    "qbench soak examples/soak/echo.yaml --target http://127.0.0.1:7860 --pid $! --duration 300 "
    "--limit rss=16GiB": [
        ("tests/run/soak/test_command.py::test_the_docs_soak_commands_run", '"--duration", "16"')],
    "qbench report reports/<soak-id>": [
        ("tests/run/soak/test_command.py::test_the_docs_soak_commands_run",
         "qbench report reports/<soak-id>")],
    "qbench soak examples/my_app.yaml --app examples/my_app.py --duration 3600 --set load.users=8": [
        ("tests/run/soak/test_command.py::test_the_docs_soak_commands_run", '"--app", "examples/my_app.py"')],
    # docs/measurement.md: an app started with Gradio's profiling on, as qbench's app launcher does
    "GRADIO_PROFILING=1 python app.py": [
        ("tests/run/e2e/test_phases_gradio.py::test_image_interface_records_carry_gradio_phases",
         "GRADIO_PROFILING")],
    "qbench run scenarios/trace.yaml --target http://127.0.0.1:7860": [
        ("tests/run/scenario/test_trace.py::test_the_readme_trace_commands_run", "trace.yaml")],
    "qbench run scenarios/trace.yaml --replay reports/<run-id>": [
        ("tests/run/scenario/test_trace.py::test_the_readme_trace_commands_run", "--replay")],
    "qbench trace import access.log --format nginx -o traffic.jsonl --include '^/predict$'": [
        ("tests/run/scenario/test_trace_formats.py::test_the_readme_trace_commands", "trace")],
    "qbench trace import session.har --format har -o traffic.jsonl --include '/queue/join$'": [
        ("tests/run/scenario/test_trace_formats.py::test_the_readme_trace_commands", "trace")],
    "qbench trace show scenarios/traffic.jsonl": [
        ("tests/run/scenario/test_trace_formats.py::test_the_readme_trace_commands", "trace")],
    "qbench serve --preset pipeline": [
        ("tests/docs/test_readme_plain_http.py::test_the_readme_commands_run", "serve")],
    "qbench run scenarios/pipeline.yaml": [
        ("tests/docs/test_readme_plain_http.py::test_the_readme_commands_run", "load.duration=2")],
    "qbench serve --preset tokens": [
        ("tests/docs/test_readme_plain_http.py::test_the_readme_commands_run", "serve")],
    "qbench run scenarios/openai-chat.yaml --set endpoint.model=tokens --set load.users=8 "
    "--set load.duration=20": [
        ("tests/docs/test_readme_plain_http.py::test_the_readme_commands_run", "load.duration=2")],
    "qbench serve --preset chat": [
        ("tests/docs/test_readme_plain_http.py::test_the_readme_commands_run", "serve")],
    "qbench run scenarios/openai-chat.yaml": [
        ("tests/docs/test_readme_plain_http.py::test_the_readme_commands_run", "load.duration=2")],
    "qbench serve --preset sleep": [
        ("tests/docs/test_readme_capacity.py::test_the_readme_capacity_commands_run", '"sleep"')],
    "qbench capacity examples/capacity_sleep.yaml --target http://127.0.0.1:7860 --think-time 10": [
        ("tests/docs/test_readme_capacity.py::test_the_readme_capacity_commands_run", "--max-probes")],
    "qbench report reports/capacity-sleep-rate-<stamp>": [
        ("tests/docs/test_readme_capacity.py::test_the_readme_capacity_commands_run",
         "capacity-sleep-rate-")],
    # A synopsis (brackets: optional parts): each part runs in the sweep end-to-end tests.
    "qbench sweep scenarios/image.yaml --grid concurrency_limit=1,2,4,8 --grid max_batch_size=1,4,8,16 "
    "--grid max_threads=8,40 --slo p95_latency_s=2 [--repeat 3] [--search smart|model|sim] "
    "[--resume reports/sweep-...]": [
        ("tests/tune/e2e/test_sweep_e2e.py::test_relaunch_mode_end_to_end_with_capacity", "--grid"),
        ("tests/tune/e2e/test_sweep_e2e.py::test_resume_after_an_interrupted_sweep", "resume_options"),
        # --repeat: parsed into the config there; no real sweep repeats its points in the suite
        ("tests/tune/sweep/test_config.py::test_config_merges_scenario_section_and_cli",
         "config.repeat == 2"),
        ("tests/tune/e2e/test_sweep_e2e.py::test_smart_search_on_a_real_server_skips_points_and_reports_it",
         "smart"),
        ("tests/docs/test_readme_sim.py::test_the_readme_sim_sweep_runs", "sweep"),
    ],
    "qbench sweep examples/capacity_sleep.yaml": [
        ("tests/docs/test_readme_capacity.py::test_the_readme_objective_commands_run", "objective")],
    "qbench sweep examples/sweep_sleep.yaml --objective capacity --grid concurrency_limit=1,4 "
    "--grid max_batch_size=1,8": [
        ("tests/docs/test_readme_capacity.py::test_the_readme_objective_commands_run", "objective")],
    "qbench sweep examples/capacity_sleep.yaml --search sim --grid concurrency_limit=1,2,4 "
    "--grid max_batch_size=1,4,8,16": [
        ("tests/docs/test_readme_sim.py::test_the_readme_sim_sweep_runs", "sim")],
    ".venv/bin/python bench/tuning_quality.py": [
        ("tests/docs/test_readme_sim.py::test_the_readme_bench_commands_run", "tuning_quality")],
    ".venv/bin/python bench/tuning_quality.py --quick": [
        ("tests/docs/test_readme_sim.py::test_the_readme_bench_commands_run", "--quick")],
    "qbench report reports/<sweep-id> --x concurrency_limit --y max_batch_size": [
        ("tests/report/test_sweep_report.py::test_the_readme_heatmap_report_command", "--x")],
    "qbench compare reports/A reports/B --max-regression p95_latency_s=10% "
    "--max-regression throughput_rps=5%": [
        ("tests/report/test_compare.py::test_cli_exit_codes", "throughput_rps=5%")],
    ".venv/bin/python bench/token_timing.py": [
        ("tests/test_bench.py::test_token_timing_joins_every_request_and_the_gaps_agree", "token_timing")],
    "qbench serve --preset echo --auth alice:wonderland --auth-token demo-token": [
        ("tests/docs/test_readme_auth.py::test_the_readme_commands_run", "serve")],
    "APP_PASSWORD=wonderland qbench run scenarios/login.yaml": [
        ("tests/docs/test_readme_auth.py::test_the_readme_commands_run", "run")],
    "qbench run scenarios/login.yaml --auth alice:wonderland": [
        ("tests/docs/test_readme_auth.py::test_the_readme_commands_run", "run")],
    "HF_TOKEN=demo-token qbench run scenarios/login.yaml --bearer-env HF_TOKEN --set auth.login=null": [
        ("tests/docs/test_readme_auth.py::test_the_readme_commands_run", "--bearer-env")],
    "qbench sweep scenarios/gradio3.yaml --grid concurrency_count=1,2,4,8 --grid max_batch_size=1,4,16": [
        ("tests/tune/e2e/test_sweep_gradio3.py::test_the_readme_gradio3_sweep_runs_and_advises_3x_code",
         "relaunch")],
    "qbench sweep scenarios/gradio3.yaml --grid concurrency_count=1,2,4,8 --grid max_batch_size=1,4,16 "
    "--live": [
        ("tests/tune/e2e/test_sweep_gradio3.py::test_the_readme_gradio3_sweep_runs_and_advises_3x_code",
         "--live")],
    "qbench run scenarios/burst.yaml --ray local": [
        ("tests/run/load/test_ray_executor.py::test_the_readme_section_runs", "load.burst=20")],
    "qbench run scenarios/burst.yaml --target http://SERVER:7860 --ray ray://HEAD:10001": [
        ("tests/run/load/test_ray_executor.py::test_the_readme_section_runs", "ray://HEAD:10001")],
    "qbench run scenarios/burst.yaml --target http://SERVER:7860 --ray HEAD:6379 --workers 2": [
        ("tests/run/load/test_ray_executor.py::test_the_readme_section_runs", "HEAD:6379")],
    "bash bench/gpu_all.sh --part 1 --out $OUT": [
        ("tests/test_bench.py::test_gpu_all_dry_run_on_the_cpu", "gpu_all.sh")],
    "bash bench/gpu_all.sh --part 2 --out $OUT": [
        ("tests/test_bench.py::test_gpu_all_dry_run_on_the_cpu", "gpu_all.sh")],
    "bash bench/gpu_all.sh --part 3 --out $OUT": [
        ("tests/test_bench_ceiling.py::test_gpu_all_part3_dry_run_on_the_cpu", "--part")],
    "bash bench/gpu_all.sh --part 4 --out $OUT": [
        ("tests/test_bench.py::test_gpu_all_part_4_dry_run_measures_decode_and_graphs_against_the_baseline",
         '"--part", "4"')],
    ".venv/bin/python bench/server_cost.py --quick": [
        ("tests/test_bench_ceiling.py::test_server_cost_reduced_run_on_the_cpu", "--quick")],
    ".venv/bin/python bench/gpu_all.py --device cpu --dry-run --out /tmp/gpu-all": [
        ("tests/test_bench.py::test_gpu_all_dry_run_on_the_cpu", "--dry-run")],
    "qbench compare reports/A reports/B --chart paired.png": [
        ("tests/report/test_compare.py::test_compare_chart_for_paired_runs", "--chart")],
    # docs/scenarios-from-your-app.md (and the README's first two): every sh command of the page runs
    **{command: [("tests/run/target/test_draft.py::test_the_docs_commands_run", "doc_commands")]
       for command in (
        "qbench init http://127.0.0.1:7860 -o image.yaml",
        "qbench run image.yaml",
        "qbench run --target http://127.0.0.1:7860 --api classify",
        "qbench capacity --target http://127.0.0.1:7860 --api classify --max-probes 4",
        "qbench init http://127.0.0.1:7860 --auth alice:wonderland -o login.yaml",
        "APP_PASSWORD=wonderland qbench run login.yaml",
        "qbench init http://127.0.0.1:7860 --protocol openai -o chat.yaml",
        "qbench run chat.yaml",
        "qbench run image.yaml --show-inputs",
    )},
    # docs/capacity-plan.md (and the README's plan): one replica, the plan, replicas behind nginx
    "qbench serve --config examples/capacity/replica_server.yaml": [
        ("tests/docs/test_docs_plan.py::test_the_plan_commands_run", "read_settings_file")],
    "qbench capacity examples/capacity/replica.yaml --target http://127.0.0.1:7860": [
        ("tests/docs/test_docs_plan.py::test_the_plan_commands_run", "REDUCED_CAPACITY"),
        ("tests/docs/test_docs_plan.py::test_the_replicas_commands_run", "REDUCED_CAPACITY")],
    "qbench plan reports/capacity-replica-<stamp> --users 1000 --think-time 30 --price 1.80": [
        ("tests/docs/test_docs_plan.py::test_the_plan_commands_run", "capacity-replica-<stamp>")],
    "qbench serve --config examples/capacity/replica_server.yaml --replicas 3": [
        ("tests/docs/test_docs_plan.py::test_the_replicas_commands_run", "reference_replicas(settings, 3")],
    "python examples/capacity/gradio_sleep_app.py --port 7861": [(GRADIO_REPLICAS, "gradio_sleep_app")],
    "python examples/capacity/gradio_sleep_app.py --port 7862": [(GRADIO_REPLICAS, "gradio_sleep_app")],
    "qbench balance http://127.0.0.1:7861 http://127.0.0.1:7862 --affinity session": [
        ("tests/tune/servers/test_balancer.py::test_qbench_serve_replicas_and_qbench_balance_serve_until_stopped",
         '"balance"'),
        (GRADIO_REPLICAS, "nginx_balancer")],
    "qbench run examples/capacity/gradio_sleep.yaml --target http://127.0.0.1:7860": [
        (GRADIO_REPLICAS, "gradio_sleep.yaml")],
    "qbench serve --preset image-ideal --replicas 2": [(IMAGE_REPLICAS, '"image-ideal", 2')],
    "qbench run scenarios/image.yaml --set load.rate=15 --set load.duration=10": [
        (IMAGE_REPLICAS, '"image.yaml"')],
    "qbench serve --preset session-chat": [
        ("tests/run/e2e/test_journey.py::test_the_docs_journey_commands_run", '"session-chat"')],
    "qbench run scenarios/journey.yaml": [
        ("tests/run/e2e/test_journey.py::test_the_docs_journey_commands_run", "journey.yaml")],
    "qbench capacity scenarios/mix.yaml --target http://127.0.0.1:7860": [
        ("tests/tune/e2e/test_capacity_mix.py::test_the_docs_capacity_command_runs", "--max-probes")],
    "qbench sweep scenarios/mix.yaml --preset abc --grid concurrency_id@c=gpu_queue,own "
    "--grid concurrency_limit@a=1,2 --slo p95_latency_s=2": [
        ("tests/tune/e2e/test_event_knobs.py::test_the_docs_sweep_command_runs", "concurrency_id@c")],
    "qbench init http://127.0.0.1:7860 --mcp --api letter_counter -o tools.yaml": [
        ("tests/run/protocols/test_mcp.py::test_init_mcp_lists_the_tools_and_the_run_calls_one_with_no_error",
         '"--mcp"')],
    "qbench run tools.yaml": [
        ("tests/run/protocols/test_mcp.py::test_init_mcp_lists_the_tools_and_the_run_calls_one_with_no_error",
         "tools.yaml")],
    # docs/streamed-inputs.md: a microphone app's .stream() event
    "qbench init http://127.0.0.1:7860 --api level -o mic.yaml": [
        ("tests/run/protocols/test_gradio_stream.py::test_init_writes_the_stream_and_two_concurrent_streams_run_with_no_error",
         '"--api", "level"')],
    "qbench run mic.yaml": [
        ("tests/run/protocols/test_gradio_stream.py::test_init_writes_the_stream_and_two_concurrent_streams_run_with_no_error",
         '"mic.yaml"')],
    "qbench capacity mic.yaml --slo p95_ttfo_s=1 --slo min_chunks_answered=0.9": [
        ("tests/run/protocols/test_gradio_stream.py::test_the_capacity_of_a_stream_is_said_in_concurrent_streams",
         '"min_chunks_answered=0.9"')],
    "qbench init http://127.0.0.1:7860 --mix -o mix.yaml": [
        ("tests/run/target/test_draft.py::test_init_mix_writes_every_endpoint_and_the_run_sends_each",
         '"--mix"')],
    "qbench serve --preset abc": [("tests/run/load/test_mix.py::test_the_docs_mix_commands_run", '"abc"')],
    "qbench run scenarios/mix.yaml": [
        ("tests/run/load/test_mix.py::test_the_docs_mix_commands_run", "mix.yaml")],
    "qbench compare reports/A reports/B --max-regression c:p95_latency_s=20%": [
        ("tests/run/load/test_mix.py::test_the_docs_mix_commands_run", "c:p95_latency_s=20%")],
    # docs/litserve.md: a LitServe app swept with its own knobs
    "qbench sweep examples/litserve/predict.yaml --app examples/litserve/app.py --python "
    "litserve-env/bin/python --grid max_batch_size=1,4,16 --objective capacity": [
        ("tests/docs/test_docs_litserve.py::test_the_capacity_sweep_proves_each_batch_size_and_advises_litserve_code",
         '"## A sweep"')],
    "qbench sweep examples/litserve/predict.yaml --launch \"env MAXBATCH={max_batch_size} "
    "litserve-env/bin/python examples/litserve/app.py\" --grid max_batch_size=4,16": [
        ("tests/docs/test_docs_litserve.py::test_a_launch_command_whose_knob_never_reaches_litserve",
         '"## When a knob never reaches LitServe"')],
    "qbench sweep examples/litserve/predict.yaml --app examples/litserve/app.py --python "
    "litserve-env/bin/python --grid concurrency_limit=1,2": [
        ("tests/docs/test_docs_litserve.py::test_a_knob_litserve_lacks_is_refused_before_the_app_starts",
         '"## A knob LitServe lacks"')],
    "MAX_BATCH_SIZE=16 qbench capacity examples/litserve/predict.yaml --app examples/litserve/app.py "
    "--python litserve-env/bin/python": [
        ("tests/docs/test_docs_litserve.py::test_the_capacity_of_the_app_qbench_starts",
         "How many users, at the winner's settings")],
    # docs/bentoml.md: a BentoML service known by its /schema.json, its capacity
    "cd examples/bentoml && bentoml serve service:Batched --port 3000": [
        ("tests/docs/test_docs_bentoml.py::test_the_service_and_the_init_command_run",
         "bentoml serve service:Batched --port 3000")],
    "qbench init http://127.0.0.1:3000": [
        ("tests/docs/test_docs_bentoml.py::test_the_service_and_the_init_command_run",
         '"## A scenario from the service"')],
    "qbench capacity examples/bentoml/predict.yaml": [
        ("tests/docs/test_docs_bentoml.py::test_the_capacity_command_runs_and_advises_bentomls_own_cap",
         '"## How many users"')],
    "qbench sweep examples/bentoml/predict.yaml --app examples/bentoml/service.py --python "
    "bentoml-env/bin/python --grid max_batch_size=2,4,16 --objective capacity": [
        ("tests/docs/test_docs_bentoml.py::test_the_sweep_proves_each_batch_size_and_advises_bentoml_code",
         '"## A sweep of its own knobs"')],
    "qbench sweep examples/bentoml/predict.yaml --app examples/bentoml/service.py --python "
    "bentoml-env/bin/python --grid max_batch_size=1,16": [
        ("tests/docs/test_docs_bentoml.py::test_a_batch_of_one_is_refused_before_the_service_starts",
         '"## A knob value BentoML refuses"')],
    # docs/rayserve.md: a Ray Serve app known by its route table and its code, its own knobs, its capacity
    "rayserve-env/bin/python examples/rayserve/app.py 8000": [
        ("tests/docs/test_docs_rayserve.py::test_the_app_and_the_init_command_run",
         "rayserve-env/bin/python examples/rayserve/app.py 8000")],
    "qbench init http://127.0.0.1:8000 --app examples/rayserve/app.py": [
        ("tests/docs/test_docs_rayserve.py::test_the_app_and_the_init_command_run",
         '"## A scenario from the app"')],
    "qbench sweep examples/rayserve/predict.yaml --app examples/rayserve/app.py --python "
    "rayserve-env/bin/python --grid max_batch_size=4,16 --grid max_ongoing_requests=5,32 "
    "--objective capacity": [
        ("tests/docs/test_docs_rayserve.py::"
         "test_the_sweep_proves_each_point_and_says_where_max_ongoing_requests_caps_the_batch",
         '"## A sweep of its own knobs"')],
    "qbench capacity examples/rayserve/predict.yaml --app examples/rayserve/app_tuned.py --python "
    "rayserve-env/bin/python": [
        ("tests/docs/test_docs_rayserve.py::test_the_capacity_of_the_tuned_app_qbench_starts",
         '"## How many users: a capacity that holds"')],
    "qbench sweep examples/rayserve/predict.yaml --app examples/rayserve/app.py --python "
    "rayserve-env/bin/python --grid concurrency_limit=1,2": [
        ("tests/docs/test_docs_rayserve.py::test_a_knob_ray_serve_lacks_is_refused_before_the_app_starts",
         '"## A knob Ray Serve lacks"')],
    # docs/torchserve.md: TorchServe known by its own description, its handler's keys, its knobs swept
    "cd examples/torchserve && ../../torchserve-env/bin/torchserve --start --foreground --ncs --ts-config "
    "config.properties": [
        ("tests/docs/test_docs_torchserve.py::test_the_server_and_the_init_command_run_with_no_error",
         "--ncs --ts-config config.properties")],
    "qbench init http://127.0.0.1:8080 --app examples/torchserve/config.properties": [
        ("tests/docs/test_docs_torchserve.py::test_the_server_and_the_init_command_run_with_no_error",
         '"## A scenario from the server"')],
    "qbench sweep examples/torchserve/predict.yaml --app examples/torchserve/config.properties --python "
    "torchserve-env/bin/python --grid batch_size=1,4,16 --objective capacity": [
        ("tests/docs/test_docs_torchserve.py::"
         "test_the_sweep_proves_each_batch_size_and_advises_torchserve_configuration", '"## A sweep"')],
    "qbench capacity examples/torchserve/predict.yaml --app examples/torchserve/config.properties --python "
    "torchserve-env/bin/python": [
        ("tests/docs/test_docs_torchserve.py::test_the_capacity_of_the_model_qbench_starts",
         '"## How many users"')],
    "qbench soak examples/torchserve/predict.yaml --app examples/torchserve/config.properties --python "
    "torchserve-env/bin/python --duration 120 --rate 100": [
        ("tests/docs/test_docs_torchserve.py::"
         "test_the_soak_of_the_model_qbench_starts_watches_its_java_frontend_and_workers",
         '"## Does it hold"')],
    "qbench sweep examples/torchserve/predict.yaml --app examples/torchserve/config.properties --python "
    "torchserve-env/bin/python --grid concurrency_limit=1,2": [
        ("tests/docs/test_docs_torchserve.py::test_a_knob_torchserve_lacks_is_refused_before_it_starts",
         '"## A knob TorchServe lacks"')],
    # docs/development.md: where the suite's CPU goes, from the kernel's process accounting
    ".venv/bin/python -m tests.census /tmp/acct.txt /tmp/ps.log": [
        ("tests/test_census.py::test_the_documented_command_prints_the_census", "tests.census")],
    # docs/development.md: the suite's slowest tests, from its own CPU log
    ".venv/bin/python -m tests.timing /tmp/tests.tsv --slowest 20": [
        ("tests/test_timing.py::test_the_documented_command_prints_the_slowest_tests", "tests.timing")],
    # docs/gradio-demos.md: the demo bench on demos of our own, from a git repository and from a folder
    ".venv/bin/python bench/gradio_demos.py --gradio-git ../gradio.git --out /tmp/demos": [
        ("tests/run/e2e/test_demo_apps.py::test_the_demo_bench_runs_from_a_git_repository", "--gradio-git")],
    ".venv/bin/python bench/gradio_demos.py --demos ../gradio/demo --only hello_world,calculator "
    "--out /tmp/d": [
        ("tests/run/e2e/test_demo_apps.py::test_the_demo_bench_runs_from_a_folder", "--demos")],
}

#: Commands no test runs, and why (a GPU or a cluster; the suite itself).
NOT_RUN = {
    "make test": "the test suite itself",
    "make test-busy": "the test suite itself, beside busy loops (tests/test_makefile.py runs its loops)",
    "python3 -m venv .venv": "GPU set-up: the CPU set-up is what `make setup` does before every test run",
    ".venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cu124":
        "GPU set-up (CUDA wheel)",
    "make setup TORCH=torch": "GPU set-up (keeps a CUDA torch already installed)",
    "RAY_worker_niceness=0 ray start --head --port 6379": "starts a Ray cluster's head node (a cluster)",
    "RAY_worker_niceness=0 ray start --address HEAD:6379": "joins a Ray cluster (a cluster)",
    "bash bench/gpu_wheels.sh --gradio": "downloads wheels for the GPU machine (run before a GPU session)",
    "git clone --bare https://github.com/gradio-app/gradio ../gradio.git":
        "downloads Gradio's repository (the network); the test makes a small git repository instead",
}


def test_every_readme_command_is_covered() -> None:
    table = {**RUN_HERE, **ELSEWHERE, **NOT_RUN}
    missing = [c for c in readme_commands() if c not in table]
    assert not missing, (
        "README.md or docs/ show command(s) that no test runs:\n  " + "\n  ".join(missing)
        + "\nrun each at reduced size in a test and list it in tests/docs/test_readme.py"
        " (RUN_HERE or ELSEWHERE with the test's id; NOT_RUN only for GPU/cluster set-up)"
    )
    stale = [c for c in table if c not in readme_commands()]
    assert not stale, ("tests/docs/test_readme.py lists command(s) no longer in README.md or docs/:\n  "
                       + "\n  ".join(stale))
    overlap = (RUN_HERE.keys() & ELSEWHERE.keys()) | ((RUN_HERE.keys() | ELSEWHERE.keys()) & NOT_RUN.keys())
    assert not overlap, f"listed twice: {sorted(overlap)}"


def defined_tests(path: Path) -> set[str]:
    tree = parse(path)
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_listed_test_exists_and_runs_that_command() -> None:
    here = defined_tests(Path(__file__))
    assert set(RUN_HERE.values()) <= here, sorted(set(RUN_HERE.values()) - here)
    for command, tests in ELSEWHERE.items():
        for test_id, fragment in tests:
            file, _, name = test_id.partition("::")
            path = ROOT / file
            assert path.is_file(), f"{command!r}: {file} does not exist"
            assert name in defined_tests(path), f"{command!r}: no {name} in {file}"
            source = path.read_text(encoding="utf-8")
            assert fragment in source, f"{command!r}: {file} never mentions {fragment!r}"


def test_the_parser_joins_lines_and_drops_comments() -> None:
    text = ("```sh\nqbench a --x 1 \\\n    --y 2   # note\nqbench serve --preset p &   # bg\n\n"
            "# only a comment\n```\n")
    assert readme_commands(text) == ["qbench a --x 1 --y 2", "qbench serve --preset p"]


# ---------------------------------------------------------------- the pages: short README, links that resolve

README_MAX_LINES = 200
#: Words that belong on the developer page (docs/development.md), not on a user's page: a worklog.
WORKLOG = re.compile(r"\bissue \d+|\bTODO\b|\bto-do\b|next GPU session|was lent", re.I)


def prose(text: str) -> str:
    """A page without its fenced code blocks (a `# comment` in a YAML block is no heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", heading.strip().lower())  # a link: its text
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(path.read_text(encoding="utf-8")), re.M):
        base = slug(heading)
        n = 0
        while (name := base if n == 0 else f"{base}-{n}") in found:
            n += 1
        found.add(name)
    return found


def relative_links(path: Path) -> list[str]:
    """The targets of a page's markdown links that are not URLs (`page.md`, `page.md#anchor`, `#anchor`)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", prose(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"^[a-z]+:", t)]


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to a page under docs/ "
        "(and measured tables to bench/RESULTS.md), and link it from the README's table")


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in linked_documents():
        for target in relative_links(page):
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no heading #{anchor} in "
                              f"{dest.relative_to(ROOT)})")
    assert not broken, "broken links:\n  " + "\n  ".join(broken)


def test_every_docs_page_is_linked_from_the_readme_or_the_index() -> None:
    index = DOCS / "README.md"
    linked = {(page.parent / t.partition("#")[0]).resolve()
              for page in (README, index) for t in relative_links(page) if t.partition("#")[0]}
    orphans = [str(p.relative_to(ROOT)) for p in sorted(DOCS.rglob("*.md")) if p != index and p not in linked]
    assert not orphans, f"docs page(s) linked from neither README.md nor docs/README.md: {orphans}"
    assert index in linked, "README.md does not link docs/README.md"


def test_user_pages_hold_no_worklog() -> None:
    """To-do lists and session notes go to docs/development.md, not to the pages users read."""
    pages = [p for p in documents() if p.name != "development.md"] + [ROOT / "bench" / "RESULTS.md"]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in pages
             for m in WORKLOG.finditer(p.read_text(encoding="utf-8"))]
    assert not found, "worklog text on a user page (move it to docs/development.md):\n  " + "\n  ".join(found)


def test_the_link_helpers() -> None:
    assert slug("Tuning quality (bench/tuning_quality.py)") == "tuning-quality-benchtuning_qualitypy"
    assert slug("Older Gradio releases (`gradio:`)") == "older-gradio-releases-gradio"
    assert slug("Checked against the server's own clock") == "checked-against-the-servers-own-clock"
    text = "# A\n[x](b.md#c) [y](https://e.org) [z](#a)\n```yaml\n# not: a heading [w](nope.md)\n```\n"
    assert re.findall(r"^#{1,6} (.+)$", prose(text), re.M) == ["A"]
    assert re.findall(r"\]\(([^)\s]+)\)", prose(text)) == ["b.md#c", "https://e.org", "#a"]


# ---------------------------------------------------------------- run here, at reduced size


def tiny(preset: str) -> ServerSettings:
    """The preset with its model at the `tiny` size (random init, loads in a second)."""
    raw = read_settings_file(preset_path(preset))
    for fn in raw["functions"]:
        fn["params"] = {**fn.get("params", {}), "size": "tiny"}
    return parse_settings(raw, f"preset {preset} (tiny)")


@pytest.fixture(scope="module")
def image_server() -> Iterator[RunningServer]:
    with serve_in_thread(tiny("image"), startup_timeout_s=120) as server:
        yield server


def qbench(*args: str) -> str:
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, f"qbench {shlex.join(args)}\n{out.output}"
    return out.output


def as_args(command: str, replace: dict[str, str]) -> list[str]:
    """A README command's qbench arguments, with placeholders (URLs, <run-id>, paths) replaced."""
    args = shlex.split(command)
    assert args[0] == "qbench", command
    return [replace.get(a, a) for a in args[1:]]


def test_quick_start_image_run_and_its_reports(image_server: RunningServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    run_dir, out_dir = tmp_path / "run", tmp_path / "r"
    command = "qbench run scenarios/image.yaml --target http://127.0.0.1:7860"
    args = as_args(command, {"http://127.0.0.1:7860": image_server.url})
    qbench(*args, "--out", str(run_dir), *REDUCED_RUN)
    records = read_records(run_dir)
    assert records and all(r.ok for r in records)
    replace = {"reports/<run-id>": str(run_dir), "/tmp/r": str(out_dir)}
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    qbench(*as_args("qbench report reports/<run-id>", replace))
    assert (run_dir / "report.html").exists()
    qbench(*as_args("qbench report reports/<run-id> --out /tmp/r --open", replace))
    assert (out_dir / "report.html").exists() and opened and opened[0].endswith("report.html")


def test_quick_start_burst(server_factory: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """burst.yaml against the sleep preset (the comment beside it), 20 requests instead of 200."""
    monkeypatch.chdir(ROOT)
    command = "qbench run scenarios/burst.yaml --set load.burst=200 --set slo.max_latency_s=3"
    with serve_in_thread(load_preset("sleep")) as server:
        qbench(*as_args(command, {}), "--set", "load.burst=20", "--target", server.url,
               "--out", str(tmp_path / "run"), "--no-live")
    records = read_records(tmp_path / "run")
    assert len(records) == 20 and all(r.ok for r in records)


def test_make_demo(image_server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo` runs `python -m qbench demo`: the same, 2 s long, on the tiny image model."""
    import contextlib

    from qbench import demo

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "demo: $(STAMP)\n\t$(PY) -m qbench demo\n" in makefile
    monkeypatch.setattr(demo, "start_reference_server",
                        lambda preset: contextlib.nullcontext(image_server.url))
    qbench("demo", "--set", "load.duration=2", "--set", "load.warmup=0", "--reports", str(tmp_path))
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "report.html").exists() and read_records(run_dir)


def served(argv: list[str]) -> dict[str, object]:
    """Start `qbench serve ...` (port 0), read its /status settings, stop it."""
    proc = subprocess.Popen([sys.executable, "-m", "qbench", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"ready on (http://\S+)", line)
        assert match, line + proc.stdout.read()
        settings: dict[str, object] = httpx.get(match.group(1) + "/status", timeout=10).json()["settings"]
        return settings
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_serve_commands(tmp_path: Path) -> None:
    """As written, except `--port 0` (7860 may be taken) and a my_server.yaml written here."""
    config = tmp_path / "my_server.yaml"
    config.write_text((ROOT / "reference_server" / "presets" / "sleep.yaml").read_text())
    sleep = served(as_args("qbench serve --preset sleep --port 7860", {"7860": "0"}))
    assert sleep["functions"]
    command = ("qbench serve --config my_server.yaml --max-threads 8 --default-concurrency-limit 2 "
               "--max-size 32")
    custom = served(as_args(command, {"my_server.yaml": str(config)}) + ["--port", "0"])
    assert custom["queue"] == {**custom["queue"], "default_concurrency_limit": 2, "max_size": 32}  # type: ignore[dict-item]
    assert custom["launch"]["max_threads"] == 8  # type: ignore[index]
