"""Every output folder's name (`new_folder`) and JSON file in it (`Writer`: secrets masked, atomic)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from qbench.run.scenario.credentials import Secrets
from qbench.run.scenario.schema import file_slug

__all__ = ["REPORTS", "Kind", "Writer", "new_folder", "remove_if_empty", "stamp"]

REPORTS = Path("reports")
STAMP_FORMAT = "%Y%m%d-%H%M%S"
Kind = Literal["run", "sweep", "capacity", "soak", "app"]


def stamp(when: datetime | None = None) -> str:
    """`YYYYmmdd-HHMMSS` in UTC (`when`: now; a naive `when` is taken as local time)."""
    return (when or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime(STAMP_FORMAT)


def new_folder(kind: Kind, name: str, root: Path = REPORTS, *, when: datetime | None = None) -> Path:
    """A new, empty `<root>/<kind>-<slug>-<stamp>` folder, created (`-2`, `-3`... appended on a clash)."""
    base = f"{kind}-{file_slug(name, default=kind)}-{stamp(when)}"
    root.mkdir(parents=True, exist_ok=True)
    path, n = root / base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = root / f"{base}-{n}"


def remove_if_empty(path: Path) -> None:
    """Drop a folder `new_folder` made for work that failed before writing anything into it."""
    try:
        path.rmdir()
    except OSError:
        pass  # not empty (or already gone): keep what is there


@dataclass(frozen=True)
class Writer:
    """Writes files for one run, sweep or capacity search, masking its `secrets` in everything."""

    secrets: Secrets = field(default_factory=Secrets)

    def mask(self, text: str) -> str:
        """`text` as it may be shown or written: every secret as `***`."""
        return self.secrets.redact(text)

    def mask_error(self, exc: BaseException) -> None:
        """Mask the secrets in an exception's message in place, before the CLI prints it."""
        exc.args = tuple(self.mask(a) if isinstance(a, str) else a for a in exc.args)

    def json(self, path: Path, data: Any) -> None:
        """`data` as indented JSON (non-JSON values via `str`), masked, atomically replacing `path`."""
        self.text(path, json.dumps(data, indent=2, default=str))

    def text(self, path: Path, text: str) -> None:
        """`text`, masked, atomically replacing `path` (through `<path>.tmp`)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.mask(text), encoding="utf-8")
        tmp.replace(path)
