"""A bounded slice of ``bench.fuzz_bench``: generated requests to the REST and replication
APIs of two live regions may get no 5xx and leave no half-changed state.

Fixed seed and a few hundred requests, so CI is reproducible and quick; the bench runs
the same harness (:mod:`lakefs_testing.fuzzing`) for as long as asked.
"""

from __future__ import annotations

from pathlib import Path

from lakefs_testing.fuzzing import Fuzzer, fuzz_regions

REQUESTS = 400
SEED = 20240611


def test_no_server_errors_and_no_half_changed_state(tmp_path: Path) -> None:
    with fuzz_regions(tmp_path, "sqlite") as (east, west):
        report = Fuzzer(east, west, seed=SEED).run(REQUESTS)
    assert report.requests == REQUESTS
    # the seeds take requests deep: many succeed, not only the not-found checks
    assert sum(n for s, n in report.statuses.items() if s.startswith("2")) > REQUESTS // 20
    assert report.server_errors == [], report.summary()
    assert report.findings == {"east": [], "west": []}, report.summary()
    assert not report.failures["viewer_changes_nothing"], report.summary()
