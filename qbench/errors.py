"""User-facing failures; per-request problems never raise (they are error kinds on records). QbenchError:
the CLI prints it, exits with `exit_code`. ScenarioError: a bad scenario or option; TargetError: the target
unreachable or unexpected; ServerLaunchError: a server qbench started did not come up; ExecutorError: workers
could not start or one was lost; SloViolation: thresholds broken (exit 3); RunInterrupted: Ctrl-C (130)."""

from __future__ import annotations


class QbenchError(Exception):
    exit_code = 2


class ScenarioError(QbenchError):
    pass


class TargetError(QbenchError):
    pass


class ServerLaunchError(QbenchError):
    pass


class ExecutorError(QbenchError):
    pass


class SloViolation(QbenchError):
    exit_code = 3


class RunInterrupted(QbenchError):
    exit_code = 130
