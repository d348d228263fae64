"""The DR drill: its loss accounting on fabricated records, and the quick drill as CI
runs it (``python -m e2e.drill --quick``).

The full drill is a command: ``make drill`` (``python -m e2e.drill --duration S``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e.drill import PhaseResult, exit_status
from e2e.ledger import AckedCommit, CommitLedger, RpoBound, unreachable

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0


def _acked(n: int, region: str = "east", branch: str = "main") -> AckedCommit:
    """The n-th fabricated commit, acknowledged n seconds after T0."""
    return AckedCommit(f"c{n:02d}", region, branch, T0 + n)


def _status(**branches: tuple[float, int | None]) -> dict[str, object]:
    """A status answer: per branch ``(lag_seconds, source_confirmed_at)``."""
    return {"lag_seconds": max(lag for lag, _ in branches.values()),
            "branches": [{"branch": b, "lag_seconds": lag, "source_confirmed_at": at}
                         for b, (lag, at) in branches.items()]}


def test_the_ledger_selects_by_region_and_time() -> None:
    ledger = CommitLedger()
    for commit in (_acked(1), _acked(2, "west"), _acked(3), _acked(4, "west")):
        ledger.add(commit)
    assert [c.commit_id for c in ledger.commits("east")] == ["c01", "c03"]
    assert [c.commit_id for c in ledger.commits(after=T0 + 1, until=T0 + 3)] == ["c02", "c03"]
    assert len(ledger) == 4
    assert unreachable(ledger.commits(), {"c01", "c04"}) == [_acked(2, "west"), _acked(3)]


def test_the_bound_is_the_later_of_the_confirmation_and_now_minus_the_lag() -> None:
    # main: confirmed at T0+5 (whole seconds), the lag read at T0+10 says 4.5s: T0+5.5;
    # etl: confirmed at T0+2 while the lag says 9s: the confirmation, T0+2
    bound = RpoBound.from_status(_status(main=(4.5, int(T0) + 5), etl=(9.0, int(T0) + 2)),
                                 read_at=T0 + 10)
    assert bound.confirmed == {"main": T0 + 5.5, "etl": T0 + 2}
    assert bound.lag_seconds == 9.0
    commits = [_acked(5), _acked(6), _acked(3, branch="etl"), _acked(7, branch="new")]
    # a branch the status does not list was never confirmed: all of it is at risk
    assert bound.at_risk(commits) == [_acked(6), _acked(3, branch="etl"),
                                      _acked(7, branch="new")]
    assert bound.seconds_at_risk(T0 + 11) == 9.0
    assert bound.outside([_acked(5), _acked(6)]) == [_acked(5)]


def test_a_switchover_that_loses_a_commit_fails_the_drill() -> None:
    acked = [_acked(n) for n in range(1, 6)]
    fine = PhaseResult("switchover", "switchover east -> west", "east", "west")
    fine.account_switchover(acked, {c.commit_id for c in acked} | {"other"})
    assert fine.lost == [] and fine.problems == [] and fine.acked_by_old == 5
    lossy = PhaseResult("switchover", "switchover east -> west", "east", "west")
    lossy.account_switchover(acked, {"c01", "c02", "c03", "c05"})
    assert lossy.lost == [_acked(4)]
    assert lossy.problems == ["a switchover lost 1 commit(s): c04 (east main)"]
    assert exit_status([fine]) == 0 and exit_status([fine, lossy]) == 1


def test_a_failover_may_lack_only_what_the_bound_put_at_risk() -> None:
    # the status said main was confirmed at T0+5.5; east acknowledged c01-c08, the kill
    # came at T0+8.5
    bound = RpoBound.from_status(_status(main=(4.5, int(T0) + 5)), read_at=T0 + 10)
    acked = [_acked(n) for n in range(1, 9)]
    within = PhaseResult("failover", "failover", "east", "west", event_at=T0 + 8.5)
    within.account_failover(bound, acked, {f"c{n:02d}" for n in range(1, 7)})
    assert [c.commit_id for c in within.at_risk] == ["c06", "c07", "c08"]
    assert within.missing == [_acked(7), _acked(8)] and within.outside == []
    assert within.problems == [] and within.seconds_at_risk == 3.0
    # c04 was acknowledged before the confirmation, yet west lacks it
    broken = PhaseResult("failover", "failover", "east", "west", event_at=T0 + 8.5)
    broken.account_failover(bound, acked, {f"c{n:02d}" for n in range(1, 7)} - {"c04"})
    assert broken.outside == [_acked(4)]
    assert exit_status([within, broken]) == 1


def test_a_failback_must_keep_every_diverged_commit() -> None:
    acked = [_acked(n) for n in range(1, 6)] + [_acked(6, branch="etl")]
    missing = [_acked(5), _acked(6, branch="etl")]
    everything = {c.commit_id for c in acked}
    kept = PhaseResult("failback", "failback", "east", "west")
    kept.account_failback(missing, acked, kept={"c01", "c05", "c06"}, reachable=everything)
    assert kept.kept_commits == 2 and kept.unkept == [] and kept.lost == []
    assert exit_status([kept]) == 0
    # etl's head was not kept, and nothing else reaches it: kept-list short and a loss
    short = PhaseResult("failback", "failback", "east", "west")
    short.account_failback(missing, acked, kept={"c01", "c05"},
                           reachable=everything - {"c06"})
    assert short.unkept == [_acked(6, branch="etl")] and short.lost == [_acked(6, branch="etl")]
    assert len(short.problems) == 2 and exit_status([short]) == 1
    # a commit that no region still has, whatever was kept, is lost at the end
    end = PhaseResult("end", "end", "west", "east")
    end.account_end(acked, everything - {"c02"})
    assert end.lost == [_acked(2)] and exit_status([kept, end]) == 1
    assert exit_status([kept], "RuntimeError: boom") == 2


@pytest.mark.e2e
def test_the_quick_drill_loses_nothing(tmp_path: Path) -> None:
    summary_path = tmp_path / "drill.json"
    run = subprocess.run([sys.executable, "-m", "e2e.drill", "--quick", "--seed", "2",
                          "--summary-json", str(summary_path)],
                         cwd=ROOT, text=True, capture_output=True, timeout=240)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "ok: nothing lost" in run.stdout and "DR drill report" in run.stdout
    summary = json.loads(summary_path.read_text())
    assert summary["exit_status"] == 0 and summary["error"] == ""
    phases: dict[str, list[dict[str, Any]]] = {}
    for phase in summary["phases"]:
        phases.setdefault(phase["kind"], []).append(phase)
    assert [p["kind"] for p in summary["phases"]] == [
        "switchover", "switchover", "failover", "failback", "end"]
    for phase in summary["phases"]:
        assert phase["lost"] == [] and phase["problems"] == [], phase
    for switchover in phases["switchover"]:  # RPO 0, and writes resumed in the new primary
        assert switchover["acked_by_old"] > 0 and switchover["rto_seconds"] is not None
        assert [p["phase"] for p in switchover["api_phases"]][-1] == "total"
    (failover,) = phases["failover"]
    assert failover["outside_bound"] == [] and failover["rto_seconds"] is not None
    assert failover["at_risk_commits"] >= len(failover["missing"])
    (failback,) = phases["failback"]
    assert failback["kept_commits"] >= len(failover["missing"]) == len(failback["missing"])
    assert failback["unkept"] == []
    assert all(k["branch"].startswith("failover-") for k in failback["kept"])
    (end,) = phases["end"]
    assert end["acked_by_old"] > sum(p["acked_by_old"] for p in phases["switchover"])
