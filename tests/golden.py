"""Golden outputs: what a function gave on seeded inputs, stored under tests/golden_outputs/, compared
with what it gives now. QBENCH_WRITE_GOLDEN=1 writes the files instead (after a change meant to alter
them: the diff of tests/golden_outputs/ is then the change, for review).

Numbers compare by type (an int stays an int) and floats to 1e-9 relative: another machine's numpy may
sum in another order and round the last bit differently. NaN equals NaN; dict keys compare in order.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent / "golden_outputs"
WRITE = os.environ.get("QBENCH_WRITE_GOLDEN") == "1"
REL = 1e-9
_written: set[Path] = set()  # with WRITE, the first value of a name is stored and the next compared with it


def path_of(area: str, name: str) -> Path:
    return FOLDER / area / (re.sub(r"[^\w.-]+", "-", name).strip("-") + ".json")


def as_json(value: Any) -> Any:
    """`value` as JSON would hold it: to_dict() for objects that have one, a dataclass's fields, tuples as
    lists. Anything else
    is refused (a repr may hold an address or change with the class's code, so a golden never stores one)."""
    return json.loads(json.dumps(value, default=_to_dict))


def _to_dict(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    kind = type(value).__name__
    raise TypeError(f"a golden output holds JSON values, dataclasses and to_dict()s, not {kind}")


def check(area: str, name: str, value: Any) -> None:
    """Assert `value` (as JSON) is the stored golden output `area/name` (or store it, with WRITE)."""
    path, got = path_of(area, name), as_json(value)
    if WRITE and path not in _written:
        _written.add(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
        return
    assert path.is_file(), f"no golden output {path}: run with QBENCH_WRITE_GOLDEN=1 once"
    wrong = differences(json.loads(path.read_text(encoding="utf-8")), got)
    more = f" (+{len(wrong) - 8} more)" if len(wrong) > 8 else ""
    assert not wrong, f"{path.name}: " + "; ".join(wrong[:8]) + more


def differences(want: Any, got: Any, where: str = "") -> list[str]:
    """Where `got` differs from `want` (empty: the same), each as 'path: want != got'."""
    if isinstance(want, dict) and isinstance(got, dict):
        if list(want) != list(got):
            return [f"{where or '/'}: keys {list(want)} != {list(got)}"]
        return [d for k in want for d in differences(want[k], got[k], f"{where}/{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where or '/'}: {len(want)} items != {len(got)}"]
        pairs = enumerate(zip(want, got, strict=True))
        return [d for i, (w, g) in pairs for d in differences(w, g, f"{where}/{i}")]
    if type(want) is not type(got):
        return [f"{where or '/'}: {want!r} != {got!r}"]
    if isinstance(want, float):
        same = (math.isnan(want) and math.isnan(got)) or math.isclose(want, got, rel_tol=REL, abs_tol=1e-300)
        return [] if same else [f"{where or '/'}: {want!r} != {got!r}"]
    return [] if want == got else [f"{where or '/'}: {want!r} != {got!r}"]
