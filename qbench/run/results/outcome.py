"""How a run ended, as data (`RunOutcome`), and the rule that turns it into an exit code (`verdict`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qbench.errors import ExecutorError, QbenchError, RunInterrupted, SloViolation, TargetError
from qbench.run.results.failfast import STOP_PREFIX
from qbench.run.results.run_info import RunInfo
from qbench.run.results.summary import SloCheck, Summary


@dataclass(frozen=True)
class RunOutcome:
    """Why and how a run ended, beside its Summary (the figures)."""

    # "interrupted": Ctrl-C / SIGTERM, or a failed opening (failfast stops the run the same way);
    # "deadline": stopped by a stop_when hook or cut off after duration + drain; None: ran to its end
    stop_kind: str | None = None
    stop_reason: str | None = None  # the first stop's reason, in words
    failed_opening: str | None = None  # the opening all failed one way: the kind and a sample message
    lost_workers: tuple[str, ...] = ()  # a Ray run: why each lost worker was lost
    failed_checks: tuple[SloCheck, ...] = ()  # failed SLO checks, each endpoint's too (`endpoint: check`)
    logins: int = 0  # auth.login: logins made (0 without a login)
    relogins: int = 0  # of which after a 401

    @classmethod
    def of(cls, info: RunInfo | Mapping[str, Any], summary: Summary) -> RunOutcome:
        """From the run info the executors filled in (run.json, typed or not) and the run's summary."""
        run = info if isinstance(info, RunInfo) else RunInfo.from_dict(info)
        return cls(
            stop_kind=run.stop_kind,
            stop_reason=run.stop_reason,
            failed_opening=run.failed_opening,
            lost_workers=run.lost_workers,
            failed_checks=tuple(summary.failed_checks()),
            logins=int(run.auth.get("logins", 0)) if run.logged_in else 0,
            relogins=int(run.auth.get("relogins", 0)) if run.logged_in else 0,
        )

    @property
    def interrupted(self) -> bool:
        """Ctrl-C, SIGTERM or a failed opening ended the run (no stage should go on after it)."""
        return self.stop_kind == "interrupted"

    @property
    def stopped_early(self) -> str | None:
        """Why a stop_when hook (a runaway queue) or the drain deadline ended the run; None otherwise."""
        return self.stop_reason if self.stop_kind == "deadline" else None

    @property
    def slo_passed(self) -> bool:
        return not self.failed_checks


def verdict(outcome: RunOutcome) -> QbenchError | None:
    """The error a run ends with, first match wins: lost workers ExecutorError (exit 2), failed opening
    TargetError (2), interrupted RunInterrupted (130), an SLO failed SloViolation (3); else None (0)."""
    if outcome.lost_workers:
        return ExecutorError(
            f"{len(outcome.lost_workers)} generator worker(s) lost mid-run; their unreported requests are "
            f"recorded as generator_lost: {'; '.join(outcome.lost_workers)}"
        )
    if outcome.failed_opening:
        stopped = (outcome.stop_reason or "").startswith(STOP_PREFIX)
        return TargetError(f"{'run stopped early' if stopped else 'run failed'}: {outcome.failed_opening}")
    if outcome.interrupted:
        return RunInterrupted("run interrupted: the records so far are kept")
    if outcome.failed_checks:
        return SloViolation(f"SLO violated: {', '.join(_check_text(c) for c in outcome.failed_checks)}")
    return None


def exit_code(outcome: RunOutcome) -> int:
    """The process exit code of `qbench run` for this outcome: 0, 2, 3 or 130 (see `verdict`)."""
    error = verdict(outcome)
    return 0 if error is None else error.exit_code


def _check_text(check: SloCheck) -> str:
    """'p95_latency_s (actual 1.2, limit 1)', or the note when there is no figure."""
    actual = check.note if check.actual is None and check.note else f"actual {_g(check.actual)}"
    return f"{check.name} ({actual}, limit {_g(check.threshold)})"


def _g(value: float | None) -> str:
    """A figure in an error message, to 4 significant digits."""
    return "none" if value is None else f"{value:.4g}"
