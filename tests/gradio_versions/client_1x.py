"""Runs in gradio_client 1.x's own env (tests/gradio_versions/envs.py `ensure_client_env`): the official
client against a Gradio 3.x server, printing what it got as one JSON line.

    <env>/bin/python client_1x.py http://127.0.0.1:PORT

Imports only gradio_client and the standard library (qbench is not installed there).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(url: str) -> dict[str, Any]:
    from gradio_client import Client

    client = Client(url, verbose=False)
    out: dict[str, Any] = {"protocol": client.protocol, "echo": client.predict("hi", api_name="/echo")}
    job = client.submit("x", api_name="/gen")
    out["gen"] = job.result()
    out["gen_outputs"] = list(job.outputs())
    out["gen_status"] = job.status().code.name
    batch = [client.submit(f"b{i}", api_name="/batch") for i in range(3)]
    out["batch"] = sorted(str(j.result()) for j in batch)
    try:
        client.predict("x", api_name="/fail")
        out["fail"] = "no error"
    except Exception as exc:  # the client raises on a failed job
        out["fail"] = type(exc).__name__
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])), flush=True)
