"""The many-mirrors benchmark runs (quick mode) and reports every figure it promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.many_mirrors import Options, report, run


@pytest.mark.slow
def test_quick_run_promotes_every_commit_and_counts_requests(tmp_path: Path) -> None:
    result = run(Options(mirrors=4, seconds=4, rate=4, max_copy_delay=0.3), tmp_path,
                 out=lambda _text: None)
    assert result.commits >= 8
    assert result.promoted == result.commits
    assert result.early == 0  # no mirror served a commit before its last copy landed
    assert len(result.lag_from_copy) == result.commits
    assert result.table_total > 0 and result.source_requests > 0
    assert set(result.cpu) == set(result.rss) == {"west-sidecar-0"}
    text = report(result)
    assert "per commit: mirrors-table requests" in text and "promotion after last copy" in text
