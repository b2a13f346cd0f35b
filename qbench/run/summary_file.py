"""summary.json as one typed value (`SummaryFile`): its one writer and its one tolerant reader."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qbench.run.diagnose.finding import Finding
from qbench.run.json_values import Readable
from qbench.run.results.alongside import Alongside
from qbench.run.results.files import Writer
from qbench.run.results.summary import Summary

NAME = "summary.json"
BESIDE = ("diagnosis", "auth", "app_notes", "alongside", "soak")  # the keys beside the summary's


@dataclass
class SummaryFile(Readable, tolerant=True):
    """summary.json: the Summary, and each entry beside it (None when absent or misshapen)."""

    summary: Summary
    diagnosis: list[Finding] | None = None
    auth: dict[str, Any] | None = None
    app_notes: list[str] | None = None
    alongside: list[Alongside] | None = None
    soak: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            **self.summary.to_dict(),
            "diagnosis": [f.to_dict() for f in self.diagnosis or []],
            "auth": self.auth,
            "app_notes": list(self.app_notes or []),
            "alongside": [a.to_dict() for a in self.alongside or []],
        }
        if self.soak is not None:
            data["soak"] = self.soak
        return data

    @classmethod
    def _migrate(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The summary's own keys sit at the top of the file, beside the entries."""
        return {**{k: data[k] for k in BESIDE if k in data},
                "summary": {k: v for k, v in data.items() if k not in BESIDE}}

    def write(self, run_dir: Path, writer: Writer | None = None) -> None:
        """`run_dir`/summary.json, atomically, through the run's masking writer."""
        (writer or Writer()).json(run_dir / NAME, self.to_dict())

    @classmethod
    def read(cls, run_dir: Path, notes: list[str] | None = None, then: str = "") -> SummaryFile | None:
        """`run_dir`/summary.json; None if missing, unreadable or summary-less (noted, ending in `then`)."""
        path = run_dir / NAME
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            missing = [key for key in ("requests", "latency") if key not in data]
            if missing:
                raise ValueError(f"no summary in it (no {', '.join(missing)})")
            return cls.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            if notes is not None:
                notes.append(f"{NAME} could not be read as a summary ({exc})" + (f": {then}" if then else ""))
            return None
