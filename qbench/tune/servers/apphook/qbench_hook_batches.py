"""The batch sizes a framework hands the user's function, counted by qbench's startup hook in each process
of a LitServe app or BentoML service (their hooks import it; copied beside them, standard library only).

Each process writes its own `<record>.batches.<pid>.json` ({route: {size: count}}); qbench sums them
(qbench.tune.servers.apphook.batch_counts), so the number of processes that counted shows the workers.
"""

from __future__ import annotations

import json
import os


class BatchCounter:
    """This process's batch sizes per API route, written to its own file (several processes count)."""

    def __init__(self, record_path: str | None) -> None:
        self.record_path = record_path
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, route: str, size: int) -> None:
        """One more batch of `size`; the file is rewritten each time (a batch, not a request: some
        hundreds a second at most, ~50 us each), so a process killed at the end loses no count."""
        sizes = self.counts.setdefault(route, {})
        sizes[str(size)] = sizes.get(str(size), 0) + 1
        if self.record_path:  # the pid now: a forked worker must not write its parent's file
            path = f"{self.record_path}.batches.{os.getpid()}.json"
            tmp = f"{path}.tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(self.counts, handle)
            os.replace(tmp, path)
