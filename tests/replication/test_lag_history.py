"""The lag history's bounds (one module's logic)."""

from __future__ import annotations

from datetime import UTC, datetime

from mirrors_db.models import MirrorBranch
from replication.lag_history import LagHistory, branch_lag


def test_samples_are_bounded_by_count_window_and_series() -> None:
    history = LagHistory(interval=10, window=60, max_series=2)
    for i in range(20):
        history.record("m1", "main", 1000.0 + 10 * i, float(i))
    kept = history.samples("m1", now=1000.0 + 190)["main"]
    assert len(kept) == 7 and kept[-1] == (1190.0, 19.0)  # 60 s at 10 s, both ends
    assert history.samples("m1", now=1000.0 + 230)["main"] == [(1170.0, 17.0), (1180.0, 18.0),
                                                               (1190.0, 19.0)]
    history.record("m1", "dev", 1190.0, 0.0)
    history.record("m2", "main", 1190.0, 0.0)  # a third series: the oldest goes
    assert len(history) == 2 and set(history.samples("m1", now=1190.0)) == {"dev"}
    history.forget({"m2"})
    assert history.samples("m1", now=1190.0) == {} and len(history) == 1


def test_branch_lag_counts_from_when_the_unpromoted_head_was_seen() -> None:
    seen = datetime(2026, 1, 1, tzinfo=UTC)
    behind = MirrorBranch("org", "m", "main", source_head="c2", source_head_seen_at=seen,
                          promoted_commit="c1")
    assert branch_lag(behind, seen.timestamp() + 7.5) == 7.5
    current = MirrorBranch("org", "m", "main", source_head="c2", source_head_seen_at=seen,
                           promoted_commit="c2")
    assert branch_lag(current, seen.timestamp() + 7.5) == 0.0
