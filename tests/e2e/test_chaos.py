"""The chaos checker as CI runs it: a short run passes; a planted fault makes it fail.

Longer runs are a command: ``python -m e2e.chaos --seed S --ops N``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.chaos import FAILBACK_AFTER, THIRD_VICTIMS, VICTIMS, plan, plan_digest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _chaos(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "e2e.chaos", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def test_the_plan_depends_on_the_seed_only() -> None:
    assert plan(11, 50) == plan(11, 50)
    assert plan_digest(plan(11, 50)) != plan_digest(plan(12, 50))
    kinds = {s.kind for seed in range(5) for s in plan(seed, 60)}
    assert {"commit", "create", "delete", "merge", "reset", "tag", "kill"} <= kinds
    printed = [_chaos("--seed", "11", "--ops", "50", "--plan", timeout=60) for _ in range(2)]
    assert printed[0].returncode == 0 and printed[0].stdout == printed[1].stdout
    assert plan_digest(plan(11, 50)) in printed[0].stdout


def test_handover_plans_keep_one_handover_at_a_time() -> None:
    """A failback follows each failover within its bounds (the last step at the latest),
    nothing else moves the primary meanwhile, and without ``handover`` a seed plans
    what it always planned."""
    seen: set[str] = set()
    for seed in range(40):
        steps = plan(seed, 60, handover=True)
        assert plan(seed, 60, handover=True) == steps
        assert not {s.kind for s in plan(seed, 60)} & {"switchover", "failover", "failback"}
        failover_at: int | None = None
        for i, step in enumerate(steps):
            seen.add(f"{step.kind}:{step.target}")
            if step.kind == "failback":
                assert failover_at is not None
                assert i - failover_at <= FAILBACK_AFTER[1] or i == len(steps) - 1
                failover_at = None
            elif step.kind in ("switchover", "failover"):
                assert failover_at is None
                failover_at = i if step.kind == "failover" else None
        assert failover_at is None
    assert {"switchover:source", "switchover:destination", "failover:kill",
            "failover:split", "failback:new", "failback:old"} <= seen
    assert plan_digest(plan(11, 50)) != plan_digest(plan(11, 50, handover=True))


def test_topology_plans_add_north_victims_and_group_steps_only_when_asked() -> None:
    """``--regions 3`` adds north's processes to the victims, ``--groups`` the pipeline
    and cut steps; without them a seed plans what it always did."""
    for seed in range(20):
        default = plan(seed, 60)
        assert plan(seed, 60, regions=2, groups=False) == default
        assert not {s.kind for s in default} & {"pipeline", "cut"}
        assert {s.target for s in default if s.kind == "kill"} <= set(VICTIMS)
    topology = [s for seed in range(20) for s in plan(seed, 60, regions=3, groups=True)]
    assert {"pipeline", "cut"} <= {s.kind for s in topology}
    assert set(THIRD_VICTIMS) <= {s.target for s in topology if s.kind == "kill"}
    assert all(1 <= s.n <= 3 for s in topology if s.kind == "pipeline")
    refused = _chaos("--regions", "3", "--handover", timeout=60)
    assert refused.returncode == 2 and "two regions without groups" in refused.stderr


def test_short_run_has_no_violation(tmp_path: Path) -> None:
    """As the narrow policy's user (the default); the summary has the run's figures."""
    summary = tmp_path / "summary.json"
    run = _chaos("--seed", "7", "--ops", "16", "--summary-json", str(summary))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "0 violations, converged" in run.stdout and "replication user narrow" in run.stdout
    figures = json.loads(summary.read_text())
    assert figures["combination"] == {"mirrors_db": "sqlite", "storage": "local",
                                      "replication": "builtin", "policy": "narrow",
                                      "sidecars_per_region": 1}
    assert figures["steps"] == 16 and figures["kills"] == figures["step_kinds"].get("kill", 0)
    assert figures["commits_verified"] > 0 and figures["exit_status"] == 0
    assert figures["violations"] == [] == figures["failures"] and figures["converged"]


def test_a_corrupted_mirror_fails_the_run(tmp_path: Path) -> None:
    """The exit status is not always 0: bytes changed under the mirror are reported."""
    summary = tmp_path / "summary.json"
    run = _chaos("--seed", "4", "--ops", "4", "--canary", "--policy", "broad",
                 "--summary-json", str(summary))
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "VIOLATION I2" in run.stdout and "FAILED" in run.stdout
    figures = json.loads(summary.read_text())
    assert figures["exit_status"] == 1 and figures["combination"]["policy"] == "broad"
    assert any(v.startswith("I2: ") for v in figures["violations"])


def test_short_run_across_clouds_has_no_violation(tmp_path: Path) -> None:
    """East on Cloud Storage, west on Azure Blob (emulators), the builtin copier reading
    the source bucket directly; native replication is refused there."""
    summary = tmp_path / "summary.json"
    run = _chaos("--seed", "9", "--ops", "12", "--storage", "gs,azure",
                 "--replication", "builtin-direct", "--summary-json", str(summary))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "storage gs,azure, replication builtin-direct" in run.stdout
    figures = json.loads(summary.read_text())
    assert figures["combination"]["storage"] == "gs,azure"
    assert figures["commits_verified"] > 0 and figures["objects_compared"] > 0
    assert figures["violations"] == [] == figures["failures"] and figures["converged"]
    refused = _chaos("--storage", "gs,azure", "--replication", "native", timeout=60)
    assert refused.returncode == 2 and "native replication needs S3" in refused.stderr


def test_short_run_with_handovers_has_no_violation(tmp_path: Path) -> None:
    """Seed 56's first ten steps: a switchover asked in the mirror's region while the
    workload commits, then a failover whose primary region is killed (one commit it
    acknowledged likely unmirrored), the blind mirror's status read past
    ``stale_after_seconds``, and the failback after the restart; I1-I4 on both mirrors,
    I6 on every status read, I7 after each handover."""
    summary = tmp_path / "summary.json"
    run = _chaos("--seed", "56", "--ops", "10", "--handover", "--summary-json", str(summary))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "with handovers" in run.stdout and "0 violations, converged" in run.stdout
    figures = json.loads(summary.read_text())
    assert figures["handover"] and figures["steps"] == 10
    assert (figures["switchovers"], figures["failovers"], figures["failbacks"]) == (1, 1, 1)
    assert figures["handover_commits_checked"] > 0 and figures["blind_status_reads"] > 0
    assert figures["status_reads"] > figures["blind_status_reads"]
    assert figures["violations"] == [] == figures["failures"] and figures["converged"]

