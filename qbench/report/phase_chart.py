"""Where the time went: one stacked bar per endpoint of each phase's median (client-only, queue wait, upload,
preprocess, function, postprocess, streaming diff, other), from the records with the server's phases."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from qbench.report.charts import Chart, new_figure, save
from qbench.run import Columns, RequestRecord

#: segment -> (label, colour); "server_other" is computed (total less the named phases)
SEGMENTS = {
    "client_only_s": ("client-only (network, protocol)", "#9e9e9e"),
    "server_queue_wait_s": ("queue wait", "#e8871e"),
    "server_upload_s": ("upload", "#17becf"),
    "server_preprocess_s": ("preprocess", "#8e44ad"),
    "server_fn_s": ("function", "#2e9a4a"),
    "server_postprocess_s": ("postprocess", "#1f5fa8"),
    "server_streaming_diff_s": ("streaming diff", "#bcbd22"),
    "server_other": ("other server processing", "#d62728"),
}
NAMED = ("server_preprocess_s", "server_fn_s", "server_postprocess_s", "server_streaming_diff_s")
TITLE = "Where the time went"
CAPTION = ("Per endpoint, the median of each phase of ok requests: client-only time (network and "
           "protocol), then the server's own phases as it timed them.")


def medians(records: Sequence[RequestRecord] | Columns) -> dict[str, dict[str, float]]:
    """endpoint -> segment -> median seconds, over ok measured records with the server's phases."""
    cols = records if isinstance(records, Columns) else Columns.of(records)
    if not len(cols):
        return {}
    total = cols.floats("server_total_s")
    rows = cols.ok() & cols.measured() & ~np.isnan(total)
    if not rows.any():
        return {}
    codes, endpoints = cols.labels("endpoint")
    present = sorted({endpoints[c] for c in np.unique(codes[rows])})
    out: dict[str, dict[str, float]] = {endpoint: {} for endpoint in present}
    for name in SEGMENTS:
        values = _other(cols, total) if name == "server_other" else cols.floats(name)
        for endpoint in present:
            mine = values[rows & (codes == endpoints.index(endpoint))]
            mine = mine[~np.isnan(mine)]
            if mine.size:
                out[endpoint][name] = max(float(np.median(mine)), 0.0)
    return out


def _other(cols: Columns, total: np.ndarray) -> np.ndarray:
    """The server's total less its named phases (a missing one counts 0), summed as a record would."""
    named = np.zeros(len(cols))
    for name in NAMED:
        named = named + np.nan_to_num(cols.floats(name), nan=0.0)
    return np.asarray(total - named)


def phase_bars(split: dict[str, dict[str, float]]) -> Figure:
    fig, (ax,) = new_figure(height=2.2 + 0.6 * len(split))
    labels = list(split)
    left = np.zeros(len(labels))
    for name, (label, color) in SEGMENTS.items():
        widths = np.array([split[e].get(name, 0.0) * 1000 for e in labels])
        if not widths.any():
            continue
        ax.barh(labels, widths, left=left, color=color, label=label, height=0.6)
        left += widths
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds (medians, stacked)")
    ax.set_title("Where the time went (ok requests, warm-up excluded)")
    fig.legend(loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def render_phase_chart(records: Sequence[RequestRecord] | Columns, out_dir: Path) -> list[Chart]:
    """The chart as a PNG in `out_dir` ([] when no record has the server's phases)."""
    split = medians(records)
    if not split:
        return []
    path = save(phase_bars(split), out_dir / "phases.png")
    return [Chart("phases", TITLE, CAPTION, path)]
