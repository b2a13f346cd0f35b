"""The batch sizes a framework hands the user's function, counted in each process of the app, one file a
process (summed by qbench.tune.servers.apphook.batch_counts). Standard library only."""

from __future__ import annotations

import json
import os


class BatchCounter:
    """This process's batch sizes per API route, written to its own file (several processes count)."""

    def __init__(self, record_path: str | None) -> None:
        self.record_path = record_path
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, route: str, size: int) -> None:
        """One more batch of `size`; this process's file rewritten (a process killed loses no count)."""
        sizes = self.counts.setdefault(route, {})
        sizes[str(size)] = sizes.get(str(size), 0) + 1
        if self.record_path:  # the pid now: a forked worker must not write its parent's file
            path = f"{self.record_path}.batches.{os.getpid()}.json"
            tmp = f"{path}.tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(self.counts, handle)
            os.replace(tmp, path)
