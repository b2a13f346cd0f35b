"""User-facing failures. Per-request problems never raise: they are error kinds on records.

    QbenchError                 base: the CLI prints the message and exits with `exit_code`
     +-- ScenarioError          a malformed scenario or option (names file, key, value, expectation)
     +-- TargetError            the target is unreachable or is not what the scenario expects
     +-- ServerLaunchError      a server qbench had to start did not come up
     +-- ExecutorError          the generator workers could not start (Ray missing or unreachable, too few
     |                          CPUs), or one was lost mid-run (its requests are `generator_lost` records)
     +-- SloViolation           a run or comparison broke its thresholds (exit code 3, for CI gates)
     +-- RunInterrupted         Ctrl-C or SIGTERM ended a run; its records are kept (exit code 130)
"""

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
