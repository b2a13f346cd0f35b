"""Workloads: synthetic ones with a known cost, and real transformers models, behind one interface."""

from reference_server.workloads.base import (
    Component,
    Workload,
    WorkloadConfigError,
    WorkloadInputError,
    build_workload,
    known_kinds,
    register,
)

__all__ = [
    "Component",
    "Workload",
    "WorkloadConfigError",
    "WorkloadInputError",
    "build_workload",
    "known_kinds",
    "register",
]
