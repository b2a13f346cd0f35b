"""Where the time went inside the server: the phase timings records carry -> per-endpoint medians in ms
(`phase_medians`), findings (`phase_findings`: work_share, phase_share, client_only) and each request's
demand on the device and the host (`demand`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from qbench.run.diagnose.finding import Finding
from qbench.run.records.columns import Columns
from qbench.run.records.schema import RequestRecord

MODEL_SHARE = 1 / 3  # the model under this share of the service: per-request work dominates
PHASE_SHARE = 0.25  # a phase around the model at least this share of the service is named
CLIENT_SHARE = 0.5  # time outside the server, as a share of a request's time, that dominates...
CLIENT_MIN_MS = 5.0  # ... when it is also at least this long
MIN_SERVICE_MS = 2.0  # shares of a shorter service are not named
KINDS = ("work_share", "phase_share", "client_only")  # what phase_findings finds

#: Phase name -> the record field that carries it (seconds; batch_size is a count).
FIELDS = {
    "queue_wait": "server_queue_wait_s", "upload": "server_upload_s", "preprocess": "server_preprocess_s",
    "fn_call": "server_fn_s", "postprocess": "server_postprocess_s",
    "streaming_diff": "server_streaming_diff_s", "total": "server_total_s", "prepare": "server_prepare_s",
    "batch_prepare": "server_batch_prepare_s", "h2d": "server_h2d_s", "forward": "server_forward_s",
    "batch_size": "server_batch_size",
}
#: What each phase around the model does, in a finding's words.
WORDS = {
    "upload": "receiving the uploaded files",
    "preprocess": "turning the inputs into the function's arguments: decoding, moving files to the cache",
    "postprocess": "turning the outputs into the response: encoding, saving output files to the cache",
    "streaming_diff": "diffing the streamed outputs",
    "prepare": "making each request's input ready for the model",
    "batch_prepare": "stacking the batch",
    "h2d": "copying the batch to the device",
    "fn_call": "the function around the forward pass",
}
GRADIO_PARTS = ("preprocess", "fn_call", "postprocess", "streaming_diff")
EXPLAINED_SHARE = 0.5  # of the service beside the model, what the named phases must cover to be the cause
AROUND_FORWARD = ("batch_prepare", "h2d")  # inside the function call, beside the forward pass


@dataclass(frozen=True)
class Breakdown:
    """One endpoint's service split into the model and the per-request work around it (ms, medians)."""

    service_ms: float  # total (or its parts) plus upload
    model: str  # "forward" or "fn_call"
    model_ms: float
    around: dict[str, float]  # the phases around the model, largest first
    batch_size: float | None = None

    @property
    def work_ms(self) -> float:
        return max(self.service_ms - self.model_ms, 0.0)

    @property
    def model_share(self) -> float:
        return self.model_ms / self.service_ms

    @property
    def work_explained(self) -> bool:
        """The named phases around the model cover at least half the rest of the service (evidence)."""
        return sum(self.around.values()) >= EXPLAINED_SHARE * self.work_ms

    def work_text(self) -> str:
        """'prepare 40 ms, preprocess 12 ms' (the largest three), or 'decode/preprocess/upload'."""
        named = [f"{name} {_ms(ms)}" for name, ms in list(self.around.items())[:3] if ms >= 0.05]
        return ", ".join(named) if named else "decode/preprocess/upload"

    def model_text(self) -> str:
        """'the forward pass 4.6 ms (batches of 32)' or 'the function 4.6 ms'."""
        what = "the forward pass" if self.model == "forward" else "the function"
        batch = f" (batches of {self.batch_size:.0f})" if self.batch_size and self.batch_size > 1 else ""
        return f"{what} {_ms(self.model_ms)}{batch}"


@dataclass(frozen=True)
class Demand:
    """Seconds one request asked of the device and the host (utilisation law's D); means over measured ok."""

    device_s: float | None  # (forward + h2d) / batch size: the device's time; None without a forward pass
    host_s: float  # the server's own work for the request: upload, prepare, pre/postprocess, streaming
    # diff, and its batch's share of the function around the forward pass (all of the function without one)
    requests: int  # requests the means are over

    @property
    def device_ms(self) -> float | None:
        return None if self.device_s is None else self.device_s * 1000


def demand(records: Columns | Iterable[RequestRecord]) -> Demand | None:
    """The mean Demand per request; None when no measured ok record carries the server's phases."""
    cols = _columns(records)
    phased = ~np.isnan(cols.floats("server_total_s")) | ~np.isnan(cols.floats("server_fn_s"))
    mine = cols.where(cols.measured() & cols.ok() & phased)
    if not len(mine):
        return None
    size = np.nan_to_num(mine.floats("server_batch_size"))
    size = np.where(size == 0, 1.0, size)  # `or 1`: none and 0 alike
    own = np.zeros(len(mine))
    for name in ("server_upload_s", "server_prepare_s", "server_preprocess_s", "server_postprocess_s",
                 "server_streaming_diff_s"):
        own = own + np.nan_to_num(mine.floats(name))
    forward = mine.floats("server_forward_s")
    has_forward = ~np.isnan(forward)
    on_device = forward + np.nan_to_num(mine.floats("server_h2d_s"))
    fn = mine.floats("server_fn_s")
    around = np.where(np.isnan(fn), np.nan_to_num(mine.floats("server_batch_prepare_s")), fn - on_device)
    host = np.where(has_forward, own + _floor0(around) / size, own)
    device = on_device[has_forward] / size[has_forward]
    return Demand(float(np.mean(device)) if device.size == host.size else None, float(np.mean(host)),
                  int(host.size))


def phase_medians(records: Columns | Iterable[RequestRecord]) -> dict[str, dict[str, float]]:
    """Per endpoint with phases, each server phase's median over measured ok records (ms; batch_size)."""
    cols = _columns(records)
    kept = cols.measured() & cols.ok()
    carries = np.zeros(len(cols), dtype=bool)
    for field in FIELDS.values():  # one column at a time: a run without phases reads no more
        carries |= ~np.isnan(cols.floats(field))
    mine = cols.where(kept & carries)
    if not len(mine):
        return {}
    codes, endpoints = mine.labels("endpoint")
    found: dict[int, list[tuple[int, int, str, float]]] = {}  # endpoint -> (first row, rank, phase, median)
    names = [*FIELDS, "client_only"]
    for rank, name in enumerate(names):
        values = _client_only(mine) if name == "client_only" else mine.floats(FIELDS[name])
        present = ~np.isnan(values)
        for code in np.unique(codes[present]):
            rows = present & (codes == code)
            scaled = values[rows] if name == "batch_size" else values[rows] * 1000.0
            found.setdefault(int(code), []).append(
                (int(np.argmax(rows)), rank, name, float(np.median(scaled))))
    firsts = {code: int(np.argmax(codes == code)) for code in found}
    return {endpoints[code]: {name: median for _, _, name, median in sorted(found[code])}
            for code in sorted(found, key=firsts.__getitem__)}


def _client_only(cols: Columns) -> np.ndarray:
    """Send -> result, less what the server accounts for (s); NaN without its total and queue wait."""
    result = cols.floats("result_at_s")
    end = np.where(np.isnan(result), cols.floats("completed_at_s"), result)
    server = (cols.floats(FIELDS["total"]) + cols.floats(FIELDS["queue_wait"])
              + np.nan_to_num(cols.floats(FIELDS["upload"])))
    return _floor0(end - cols.floats("sent_at_s") - server)


def _floor0(values: np.ndarray) -> np.ndarray:
    """Python's max(v, 0.0) for each value: v unless 0.0 > v (NaN stays NaN)."""
    return np.where(values < 0.0, 0.0, values)


def _columns(records: Columns | Iterable[RequestRecord]) -> Columns:
    return Columns.of(records if isinstance(records, Columns) else list(records))


def breakdown(phases: Mapping[str, float]) -> Breakdown | None:
    """The endpoint's service, model and the work around it; None without a model or a service."""
    model = "forward" if phases.get("forward") is not None else "fn_call"
    model_ms = phases.get(model)
    service = phases.get("total")
    if service is None or service <= 0:
        parts = [phases[p] for p in GRADIO_PARTS if phases.get(p) is not None]
        service = sum(parts) if parts else None
    if model_ms is None or service is None or service <= 0:
        return None
    service += phases.get("upload") or 0.0
    names = ("upload", "preprocess", "postprocess", "streaming_diff", "prepare") + (
        (*AROUND_FORWARD, "fn_call") if model == "forward" else ())
    around = {n: phases[n] for n in names if phases.get(n) is not None}
    if model == "forward" and "fn_call" in around:  # the function, less what it is made of inside
        inside = model_ms + sum(around.get(n, 0.0) for n in AROUND_FORWARD)
        around["fn_call"] = max(around["fn_call"] - inside, 0.0)
    around = dict(sorted(around.items(), key=lambda kv: -kv[1]))
    return Breakdown(service, model, min(model_ms, service), around, phases.get("batch_size"))


def phase_findings(phases: Mapping[str, Mapping[str, float]]) -> list[Finding]:
    """Findings per endpoint from its median phases in ms; [] without phases."""
    findings: list[Finding] = []
    for endpoint, mine in phases.items():
        split = breakdown(mine)
        if split is not None and split.service_ms >= MIN_SERVICE_MS:
            findings += _service_findings(endpoint, split)
        client = _client_finding(endpoint, mine)
        if client is not None:
            findings.append(client)
    return findings


def _service_findings(endpoint: str, split: Breakdown) -> list[Finding]:
    found = []
    if split.model_share < MODEL_SHARE and split.work_explained:
        found.append(Finding("work_share", (
            f"{endpoint}: {split.model_text()} of {_ms(split.service_ms)} of service: per-request work "
            f"({split.work_text()}) dominates; a faster model or more concurrency will not shorten it")))
    for name, ms in split.around.items():
        share = ms / split.service_ms
        if share >= PHASE_SHARE:
            found.append(Finding("phase_share", (
                f"{endpoint}: {name} ({WORDS.get(name, name)}) is {share:.0%} of service time "
                f"({_ms(ms)} of {_ms(split.service_ms)}, medians)")))
    return found


def _client_finding(endpoint: str, phases: Mapping[str, float]) -> Finding | None:
    client = phases.get("client_only")
    if client is None:
        return None
    whole = client + sum(phases.get(n) or 0.0 for n in ("queue_wait", "upload", "total"))
    if whole <= 0 or client < CLIENT_MIN_MS or client / whole < CLIENT_SHARE:
        return None
    return Finding("client_only", (
        f"{endpoint}: {_ms(client)} of a request's {_ms(whole)} passed outside the server (network, "
        "HTTP, message delivery; medians): the server's own phases are the smaller part"))


def _ms(value: float) -> str:
    return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"
