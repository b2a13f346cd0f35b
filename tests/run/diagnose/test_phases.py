"""Where the time went inside the server: findings from its phase medians (a table of hand-made phases),
the medians from records that carry the server's phases, and the limit they name under load."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from qbench.run.diagnose.limits import diagnose
from qbench.run.diagnose.per_endpoint import diagnose_run
from qbench.run.diagnose.phases import FIELDS, breakdown, phase_findings, phase_medians
from qbench.run.records.schema import RequestRecord
from qbench.run.results.summary import summarize
from tests.run.diagnose.test_limits import usage_server
from tests.run.diagnose.test_limits_closed import closed_loop

GPU_BATCH = {"queue_wait": 200.0, "preprocess": 30.0, "prepare": 12.0, "fn_call": 20.0, "batch_prepare": 9.0,
             "h2d": 3.0, "forward": 4.6, "postprocess": 6.0, "total": 68.0, "batch_size": 32.0}
GRADIO_IMAGE = {"queue_wait": 1.5, "preprocess": 10.0, "fn_call": 30.0, "postprocess": 27.0, "total": 68.0}

CASES: list[tuple[str, dict[str, float], list[tuple[str, str]]]] = [
    ("a GPU batch whose forward pass is small", GPU_BATCH, [
        ("work_share", "classify: the forward pass 4.6 ms (batches of 32) of 68 ms of service: "
                             "per-request work (preprocess 30 ms, prepare 12 ms, batch_prepare 9.0 ms) "
                             "dominates"),
        ("phase_share", "classify: preprocess (turning the inputs into the function's arguments: decoding, "
                        "moving files to the cache) is 44% of service time (30 ms of 68 ms, medians)"),
    ]),
    ("Gradio saving an output image", GRADIO_IMAGE, [
        ("phase_share", "classify: postprocess (turning the outputs into the response: encoding, saving "
                        "output files to the cache) is 40% of service time (27 ms of 68 ms, medians)"),
    ]),
    ("a function that is the service", {"total": 100.0, "fn_call": 95.0, "preprocess": 2.0,
                                         "postprocess": 2.0}, []),
    ("no total: the parts add up", {"preprocess": 5.0, "fn_call": 5.0, "postprocess": 20.0}, [
        ("work_share", "classify: the function 5.0 ms of 30 ms of service"),
        ("phase_share", "classify: postprocess"),
    ]),
    ("an upload beside the service", {"total": 20.0, "fn_call": 15.0, "upload": 12.0}, [
        ("phase_share", "classify: upload (receiving the uploaded files) is 38% of service time (12 ms "
                        "of 32 ms"),
    ]),
    ("time outside the server", {"total": 1.0, "fn_call": 0.9, "queue_wait": 1.5, "client_only": 10.0}, [
        ("client_only", "classify: 10 ms of a request's 12 ms passed outside the server"),
    ]),
    ("a little time outside the server", {"total": 1.0, "fn_call": 0.9, "client_only": 3.0}, []),
    ("no phases", {}, []),
    ("no model", {"queue_wait": 3.0, "upload": 2.0}, []),
    ("an instant function", {"total": 0.3, "fn_call": 0.01, "postprocess": 0.2}, []),
]


@pytest.mark.parametrize(("phases", "expected"), [(p, e) for _, p, e in CASES], ids=[c[0] for c in CASES])
def test_phase_findings(phases: dict[str, float], expected: list[tuple[str, str]]) -> None:
    found = phase_findings({"classify": phases})
    assert [f.kind for f in found] == [kind for kind, _ in expected], found
    for f, (_, start) in zip(found, expected, strict=True):
        assert f.message.startswith(start), f.message


def test_each_endpoint_is_named() -> None:
    found = phase_findings({"a": GRADIO_IMAGE, "b": {"total": 10.0, "fn_call": 9.0}, "c": GPU_BATCH})
    assert [f.message.split(":")[0] for f in found] == ["a", "c", "c"]


def test_the_function_around_the_forward_pass_is_what_it_does_besides() -> None:
    split = breakdown(GPU_BATCH)
    assert split is not None and split.model == "forward" and split.work_ms == pytest.approx(63.4)
    assert split.around["fn_call"] == pytest.approx(20.0 - 4.6 - 9.0 - 3.0)  # prepare runs outside it


class Traced(RequestRecord):
    """A record with the server's phases as attributes (the fields RequestRecord gains when the server
    reports them; phase_medians reads them by name)."""


def traced(record: RequestRecord, **phases_s: float) -> Traced:
    copy = Traced(**{f.name: getattr(record, f.name) for f in fields(RequestRecord)})
    for name, value in phases_s.items():
        setattr(copy, FIELDS[name], value)
    return copy


def test_medians_per_endpoint_in_ms_from_measured_ok_records() -> None:
    base: dict[str, Any] = {"user_id": 0, "session_id": "s", "intended_at_s": 0.0, "sent_at_s": 0.0,
                            "started_at_s": 0.05, "completed_at_s": 0.1, "outcome": "ok"}
    records: list[RequestRecord] = [
        traced(RequestRecord(request_id=i, endpoint="a", warmup=False, **base), total=0.04 + i * 0.01,
               fn_call=0.03, queue_wait=0.002, batch_size=float(i + 1)) for i in range(3)]
    records.append(traced(RequestRecord(request_id=9, endpoint="a", warmup=True, **base), total=9.0))
    records.append(RequestRecord(request_id=10, endpoint="b", warmup=False, **base))  # no phases
    medians = phase_medians(records)
    assert list(medians) == ["a"]
    assert medians["a"]["total"] == pytest.approx(50.0) and medians["a"]["batch_size"] == 2.0
    assert medians["a"]["client_only"] == pytest.approx(100.0 - 50.0 - 2.0)
    assert phase_medians([RequestRecord(request_id=0, endpoint="a", warmup=False, **base)]) == {}


def test_a_saturated_server_whose_model_is_small_names_the_work_around_it() -> None:
    """Closed-loop users on one slot, one request at a time, the server's trace carried by every record:
    the forward pass (and copy) is 7.6 ms of a 68 ms service. The limit is named with the phases (no GPU
    or CPU figures needed): at 13.4 req/s the server's own work, 60.4 ms a request, kept it 81% busy,
    the device 10%; the server's own queue wait is the queue."""
    ms = {k: v / 1000 for k, v in GPU_BATCH.items() if k not in ("batch_size", "queue_wait")}
    records: list[RequestRecord] = [
        traced(r, **ms, queue_wait=(r.started_at_s or 0.0) - (r.joined_at_s or 0.0), batch_size=1.0)
        for r in closed_loop(users=8, slots=1, service_s=0.068)]
    findings = diagnose(records, summarize(records, None))
    assert [f.kind for f in findings] == ["per_request_work", "phase_share"], findings
    message = findings[0].message
    assert message.startswith("at its limit for 8 users (they waited 477 ms beyond the round trip")
    assert ("per-request work in the server process is the limit (preprocess 30 ms, prepare 12 ms, "
            "batch_prepare 9.0 ms: 63 ms of 68 ms; the forward pass 4.6 ms; at 13.4 req/s, the device busy "
            "10% of the run (7.6 ms per request), the server's own work 81% (60 ms per request))") in message
    quick = [traced(r, total=0.068, fn_call=0.066) for r in closed_loop(users=8, slots=1, service_s=0.068)]
    assert [f.kind for f in diagnose(quick, summarize(quick, None))] == ["queue_limit"]


def test_a_mix_names_each_endpoints_phases_once() -> None:
    ms = {k: v / 1000 for k, v in GRADIO_IMAGE.items()}
    records: list[RequestRecord] = []
    for r in closed_loop(users=4, slots=4, service_s=0.068):
        r.endpoint = "a" if r.request_id % 2 else "b"
        records.append(traced(r, **ms))
    found = [f for f in diagnose_run(records, summarize(records, None)) if f.kind == "phase_share"]
    assert sorted(f.message.split(": ")[0] for f in found) == ["a", "b"], found


def test_the_servers_own_queue_wait_is_the_queue() -> None:
    """With the server's queue wait on every record, no round trip is estimated: it is the queue."""
    records: list[RequestRecord] = [traced(r, queue_wait=0.0002, total=0.1, fn_call=0.099)
                                    for r in closed_loop(users=8, slots=8)]
    (finding,) = diagnose(records, summarize(records, None))
    assert finding.kind == "headroom" and "waited 0.2 ms in the server's own queue" in finding.message


def test_the_busier_resource_is_the_limit_only_when_saturated() -> None:
    """Records built to the truth, 8 closed-loop users on one slot, 68 ms a request: the device's 60 ms
    of it (busy ~80%) is the limit; 34 ms of device and 34 ms of the server's own work alternate, each
    busy ~40%: neither is saturated and the queue's one slot is what holds (queue_limit)."""
    def run(device_ms: float, host_ms: float) -> list[str]:
        records: list[RequestRecord] = [
            traced(r, total=0.068, preprocess=host_ms / 1000, fn_call=device_ms / 1000,
                   forward=device_ms / 1000, queue_wait=(r.started_at_s or 0.0) - (r.joined_at_s or 0.0))
            for r in closed_loop(users=8, slots=1, service_s=0.068)]
        return [f.kind for f in diagnose(records, summarize(records, None), describe=False)]

    assert run(60.0, 8.0) == ["device"]
    assert run(34.0, 34.0) == ["queue_limit"]
    assert run(4.0, 64.0) == ["per_request_work"]


@pytest.mark.parametrize("nvml", [True, False])
def test_a_busy_device_in_a_process_burning_more_than_a_core_is_the_device(nvml: bool) -> None:
    """The device 90% busy (NVML, or 60 of 68 ms a request in its forward phase: 88% at 8 users on one
    slot) in a server process using 1.5 cores (decode threads, a CUDA sync that spins while it waits):
    the device is the limit. Its busy share is of what it can give; the process's cores are not a share
    of anything (today's rule named per-request work, the opposite advice)."""
    records: list[RequestRecord] = [
        traced(r, total=0.068, preprocess=0.004, fn_call=0.060, forward=None if nvml else 0.060,
               queue_wait=(r.started_at_s or 0.0) - (r.joined_at_s or 0.0))
        for r in closed_loop(users=8, slots=1, service_s=0.068)]
    server = usage_server(1.5, gpu_busy_s=9.0 if nvml else None, cpu_s=15.0)  # over 10 s: 1.5 cores
    found = diagnose(records, summarize(records, None), server, describe=False)
    assert [f.kind for f in found] == ["usage", "device"], found
    assert "server CPU 150% of a core" in found[0].message
