"""I6 and I7 as the chaos checker judges them, against regions that answer from memory:
each rule passes what the product promises and reports what breaks it."""

from __future__ import annotations

import time
from typing import Any, cast

from e2e.api import ApiError, RegionClient
from e2e.invariants import ApiMirrorChecker, HandoverAudit, InvariantViolation


class FakeRegion:
    """The few calls the rules make, answered from a commit graph and refs in memory."""

    def __init__(self, parents: dict[str, tuple[str, ...]], branches: dict[str, str],
                 tags: dict[str, str] | None = None) -> None:
        self.parents = parents
        self._branches = branches
        self._tags = tags or {}
        self.status: dict[str, Any] = {}

    def get_commit(self, repo: str, commit_id: str) -> dict[str, Any]:
        if commit_id not in self.parents:
            raise ApiError("GET", f"/commits/{commit_id}", 404, "not found")
        return {"id": commit_id, "parents": list(self.parents[commit_id])}

    def branches(self, repo: str) -> dict[str, str]:
        return dict(self._branches)

    def tags(self, repo: str) -> dict[str, str]:
        return dict(self._tags)

    def mirror_status(self, repo: str, mirror_id: str) -> dict[str, Any]:
        return self.status


def _place(region: FakeRegion) -> tuple[RegionClient, str]:
    return cast(RegionClient, region), "repo"


def test_i7_switchover_finds_an_acknowledged_commit_the_new_primary_lacks() -> None:
    graph = {"a": (), "b": ("a",), "c": ("b",)}
    old = FakeRegion(graph, {"main": "c"})
    acknowledged = {"a": "main", "b": "main", "c": "main", "gone": "b1"}  # b1 was deleted
    good = HandoverAudit([])
    required = good.required(acknowledged, ["c"], [_place(old)])
    assert set(required) == {"a", "b", "c"}
    good.check("switchover", required, _place(FakeRegion(graph, {"main": "c"})))
    good.check_same_refs("switchover", {"main": "c"}, {}, _place(FakeRegion(graph,
                                                                           {"main": "c"})))
    assert good.violations == [] and good.commits_checked == 3

    bad = HandoverAudit([])
    behind = FakeRegion({"a": (), "b": ("a",)}, {"main": "b"})
    bad.check("switchover", required, _place(behind))
    bad.check_same_refs("switchover", {"main": "c"}, {}, _place(behind))
    assert [str(v) for v in bad.violations] == [
        "I7: switchover: commit c acknowledged on main is not in the new primary",
        "I7: switchover: branch main at b in the new primary, the old primary's at c"]


def test_i7_failback_accepts_kept_branches_and_excuses_only_what_was_there() -> None:
    old_graph = {"a": (), "b": ("a",), "x": ("b",)}  # x: made in the old primary only
    old = FakeRegion(old_graph, {"main": "x"})
    audit = HandoverAudit([])
    required = audit.required({"b": "main", "x": "main"}, ["x"], [_place(old)])
    # the new primary moved main elsewhere after the failover (b is off every ref)
    new_graph = {"a": (), "b": ("a",), "w": ("a",)}
    kept = FakeRegion({**new_graph, "x": ("b",)}, {"main": "w", "failover-t-main": "x"})
    there = audit.present(_place(FakeRegion(new_graph, {"main": "w"})), required)
    assert there == {"b"}
    audit.check("failback", required, _place(kept), excused=there)
    assert audit.violations == []

    # x is in the new primary but on no ref: the failback did not keep it
    unkept = FakeRegion({**new_graph, "x": ("b",)}, {"main": "w"})
    audit.check("failback", required, _place(unkept), excused=there)
    assert [v.invariant for v in audit.violations] == ["I7"]
    assert "commit x acknowledged on main is in the new primary, but no branch or tag" \
        in str(audit.violations[0])


def _status(confirmed: float, lag: float, *, current: bool, stale: bool) -> dict[str, Any]:
    return {"mirror": {"state": "active"}, "stale_after_seconds": 12.0, "branches": [
        {"branch": "main", "source_confirmed_at": int(confirmed), "lag_seconds": lag,
         "current": current, "stale": stale}]}


def test_i6_lag_never_less_than_since_the_last_confirmation_and_blind_is_never_current(
        ) -> None:
    mirror = FakeRegion({}, {})
    violations: list[InvariantViolation] = []
    checker = ApiMirrorChecker(cast(RegionClient, FakeRegion({}, {})), "repo",
                               cast(RegionClient, mirror), "repo", collect=True,
                               violations=violations)
    now = time.time()
    mirror.status = _status(now - 5, 5.2, current=True, stale=False)  # honest
    checker.check_status("m")
    # a source server down for 3s is not judged; one down for 20s must read blind
    checker.check_status("m", source_down_since=now - 3)
    assert violations == [] and checker.stats.blind_reads == 0
    mirror.status = _status(now - 20, 20.5, current=False, stale=True)
    checker.check_status("m", source_down_since=now - 20)
    assert violations == [] and checker.stats.blind_reads == 1

    mirror.status = _status(now - 30, 0.5, current=True, stale=False)  # a false zero
    checker.check_status("m", source_down_since=now - 30)
    assert [v.invariant for v in violations] == ["I6", "I6"]
    assert "lag of 0.500s" in str(violations[0])
    assert "current=True, stale=False while its source region has been down" \
        in str(violations[1])
