"""A plain HTTP answer's `Server-Timing` header (`queue;dur=12.5, service;dur=55.1`, in ms) -> the record's
server_queue_wait_s and server_total_s, on the server's clock; other metrics and malformed entries ignored."""

from __future__ import annotations

from qbench.run.records.schema import RequestRecord

#: metric name -> the record's field (seconds)
FIELDS = {"queue": "server_queue_wait_s", "service": "server_total_s"}


def server_timing(value: str) -> dict[str, float]:
    """{metric: seconds} of a Server-Timing value's entries that carry a `dur` (ms)."""
    found: dict[str, float] = {}
    for entry in value.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        for param in params:
            key, _, number = param.partition("=")
            if name and key.strip().lower() == "dur":
                try:
                    found[name.lower()] = float(number.strip().strip('"')) / 1000
                except ValueError:
                    pass
    return found


def apply_server_timing(record: RequestRecord, value: str) -> None:
    """The record's server-clock phases from a Server-Timing value (the known metrics only, each >= 0)."""
    for name, seconds in server_timing(value).items():
        field = FIELDS.get(name)
        if field is not None and seconds >= 0:
            setattr(record, field, seconds)
