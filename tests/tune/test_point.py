"""A sweep point's or a capacity probe's figures from its runs' summaries (qbench.tune.point)."""

from __future__ import annotations

from qbench.run.results.summary import Summary
from qbench.tune.grid import Point
from qbench.tune.point import point_result
from qbench.tune.recommend import Constraints


def test_a_floor_on_a_figure_a_summary_computes_is_measured_and_judged() -> None:
    """min_chunks_answered and min_output_tps are not PointResult fields: they are read from each
    summary (their mean over repeats), so a probe is judged on them instead of 'not measured'."""
    summaries = [Summary(completed_ok=4, chunks_sent=100, chunks_answered=80, output_tps=3.0),
                 Summary(completed_ok=4, chunks_sent=100, chunks_answered=60, output_tps=5.0)]
    constraints = Constraints(slo={"min_chunks_answered": 0.9, "min_output_tps": 2.0, "min_goodput": 0.0})
    result = point_result(Point({}), summaries, constraints, "ok", "", {})
    assert result.extra["min_chunks_answered"] == 0.7 and result.extra["min_output_tps"] == 4.0
    assert "min_goodput" not in result.extra  # a field of its own (goodput_rps)
    assert constraints.slo_violations(result) == ["min_chunks_answered 0.7 < 0.9"]
