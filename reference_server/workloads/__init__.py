"""Workloads: synthetic ones with a known cost, and real transformers models, behind one interface.

    base.py          the interface every workload implements
    registry.py      every kind and its factory: build_workload, known_kinds
    synthetic.py     echo, sleep, cpu...: cheap deterministic stand-ins with a known cost
    session_chat.py  a chat whose history lives in the session (a ChatInterface's gr.State)
    ideal.py         image-ideal: the image request path before an ideal accelerator (the CPU stand-in)
    models/          transformers models built from configs (random init, real cost)
"""

from reference_server.workloads.base import (
    Component,
    Workload,
    WorkloadConfigError,
    WorkloadInputError,
)
from reference_server.workloads.registry import build_workload, known_kinds

__all__ = [
    "Component",
    "Workload",
    "WorkloadConfigError",
    "WorkloadInputError",
    "build_workload",
    "known_kinds",
]
