"""The soak of mirroring, one minute of it: nothing grows that the history does not need.

``python -m bench.soak`` runs it for hours and prints figures; here its verdict's
structural findings are checked (open files, rows of the refstores and the mirrors
table, metric series), never its timings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import HISTORY_TABLES, SoakOptions, run_soak

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_one_minute_of_mirroring_grows_nothing_but_history(tmp_path: Path) -> None:
    lines: list[str] = []
    opts = SoakOptions(minutes=1.0, window=20.0, sample_every=5.0, commit_interval=4.0,
                       objects=100, paths=400, branch_every=2, max_copy_delay=1.5,
                       interval="2s")
    result = run_soak(opts, tmp_path / "soak", out=lines.append)
    report = "\n".join(lines)
    v = result.verdict
    assert len(result.windows) >= 3, report
    assert result.commits >= 3 and result.mirrored >= 1, report
    assert v["fds_ok"] and v["rows_ok"] and v["mirrors_rows_ok"] and v["series_ok"], report
    # the history tables followed the commits; every other table stayed put
    grown = {k for k, g in v["row_growth"].items() if g > 2}
    assert {k.split(".", 1)[1] for k in grown} <= HISTORY_TABLES, report
    assert "verdict:" in report and "[window 2:" in report
    # the sidecars' range caches were read (-1: not exported) and stayed under their
    # bound (the west one's empties whenever its mirror catches up); the east one
    # mirrors nothing
    caches = v["range_cache_base_and_peak"]
    assert set(caches) == {"east-sidecar-0", "west-sidecar-0"}, report
    assert caches["east-sidecar-0"] == (0, 0), report
    assert opts.range_cache_mb is not None
    assert min(caches["west-sidecar-0"]) >= 0, report
    assert max(caches["west-sidecar-0"]) <= opts.range_cache_mb * 1e6, report
