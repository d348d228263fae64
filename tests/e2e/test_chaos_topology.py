"""The chaos checker on three regions with mirror groups, as CI runs it (a file of its
own, so that the test runner can put it beside test_chaos.py's runs, not after them).

Longer runs: ``python -m e2e.chaos --regions 3 --groups --seed S --ops N``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_chaos import _chaos

pytestmark = pytest.mark.e2e


def test_short_run_on_three_regions_with_groups_has_no_violation(tmp_path: Path) -> None:
    """Seed 229's first twelve steps: the repository mirrored to west and north, a second
    one beside it, a group of both in each destination; three pipelines, a requested
    cut, kill -9 of east's server, north's sidecar and west's server. I1-I4 on the four
    mirrors, I8 in both regions all along."""
    summary = tmp_path / "summary.json"
    run = _chaos("--seed", "229", "--ops", "12", "--regions", "3", "--groups",
                 "--summary-json", str(summary))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "on 3 regions with groups: 0 violations, converged" in run.stdout
    figures = json.loads(summary.read_text())
    assert (figures["regions"], figures["groups"], figures["steps"]) == (3, True, 12)
    assert figures["pipelines"] == 3 and figures["kills"] == 3
    assert figures["group_reads"] > 0 and figures["cuts_checked"] > 0
    assert figures["violations"] == [] == figures["failures"] and figures["converged"]
