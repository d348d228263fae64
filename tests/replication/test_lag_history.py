"""The lag history's bounds (one module's logic)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

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


def test_branch_lag_never_reads_less_than_the_time_since_the_last_confirmation() -> None:
    confirmed = datetime(2026, 1, 1, tzinfo=UTC)
    seen = confirmed + timedelta(seconds=20)
    now = seen.timestamp() + 7.5
    # behind: the source moved after the last confirmation; the bound is from then
    behind = MirrorBranch("org", "m", "main", source_head="c2", source_head_seen_at=seen,
                          promoted_commit="c1", source_confirmed_at=confirmed)
    assert branch_lag(behind, now) == 27.5
    # caught up at the last read, 27.5 s ago: a commit since may not have been seen
    current = replace(behind, promoted_commit="c2")
    assert branch_lag(current, now) == 27.5
    assert branch_lag(replace(current, source_confirmed_at=seen), now) == 7.5
    # a row of an earlier version, never confirmed: from when its head was first seen
    legacy = replace(current, source_confirmed_at=None)
    assert branch_lag(legacy, now) == 7.5
    assert branch_lag(MirrorBranch("org", "m", "main"), now) == 0.0
