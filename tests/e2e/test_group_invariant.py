"""I8 as the chaos checker and the topology scenarios judge it, against a destination
region that answers from memory: served heads of one cut pass; heads of two cuts, a
served cut older than one served before, and a cut the source never had at one moment
are reported."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from e2e.api import ApiError, RegionClient
from e2e.invariants import (
    GroupCutChecker,
    GroupMemberRef,
    InvariantViolation,
    SourceTimeline,
)

MEMBERS = [GroupMemberRef("m-f", "features", "features", "main"),
           GroupMemberRef("m-l", "labels", "labels", "main")]


class FakeDestination:
    """Member heads in memory; ``on_read`` may move them between two reads."""

    def __init__(self, heads: dict[str, str]) -> None:
        self.heads = heads
        self.reads = 0
        self.on_read: Callable[[int], None] = lambda _n: None

    def branch_head(self, repo: str, branch: str) -> str:
        self.reads += 1
        self.on_read(self.reads)
        if repo not in self.heads:
            raise ApiError("GET", f"/repositories/{repo}/branches/{branch}", 404, "not found")
        return self.heads[repo]


def _checker(region: FakeDestination, cuts: dict[int, dict[str, str]],
             timeline: SourceTimeline | None = None) -> GroupCutChecker:
    def read(after: int) -> list[tuple[int, dict[str, str]]]:
        return [(s, h) for s, h in sorted(cuts.items()) if s > after]

    return GroupCutChecker(cast(RegionClient, region), "west", "g", MEMBERS, read, timeline,
                           violations=[], armed=True)


CUTS = {1: {"m-f": "f0", "m-l": "l0"}, 2: {"m-f": "f1", "m-l": "l0"},
        3: {"m-f": "f1", "m-l": "l1"}}


def test_heads_of_one_cut_pass_and_the_cut_served_only_moves_forward() -> None:
    region = FakeDestination({"features": "f0", "labels": "l0"})
    checker = _checker(region, CUTS)
    checker.check()
    region.heads = {"features": "f1", "labels": "l1"}
    checker.check()
    assert checker.violations == [] and checker.stats.group_reads == 2
    assert checker.served_at_least == 3 and checker.served_cut() == 3
    region.heads = {"features": "f1", "labels": "l0"}  # cut 2, after cut 3 was served
    checker.check()
    assert [str(v) for v in checker.violations] == [
        "I8: group g in west went back from cut 3 to cut 2 (features/main@f1, "
        "labels/main@l0)"]


def test_heads_of_two_cuts_are_a_violation() -> None:
    region = FakeDestination({"features": "f0", "labels": "l1"})  # old features, new labels
    checker = _checker(region, CUTS)
    checker.check()
    assert [v.invariant for v in checker.violations] == ["I8"]
    assert "serves features/main@f0, labels/main@l1, heads of no one cut (cuts 1..3 " \
        "known)" in str(checker.violations[0])


def test_a_cut_promoted_between_the_reads_is_read_again_not_judged() -> None:
    region = FakeDestination({"features": "f0", "labels": "l0"})

    def promote(n: int) -> None:  # cut 3 lands after the first read of features
        if n == 2:
            region.heads = {"features": "f1", "labels": "l1"}

    region.on_read = promote
    checker = _checker(region, CUTS)
    checker.check()
    assert checker.violations == [] and checker.stats.group_reads_moved == 1
    assert checker.stats.group_reads == 1 and checker.served_at_least == 3


def test_unarmed_or_unanswered_reads_judge_nothing() -> None:
    checker = _checker(FakeDestination({"features": "f0"}), CUTS)  # labels not there yet
    checker.check()
    assert checker.stats.group_reads == 0 and checker.violations == []
    mixed = _checker(FakeDestination({"features": "f0", "labels": "l1"}), CUTS)
    mixed.armed = False  # lone mirrors promoted before the group existed
    mixed.check()
    assert mixed.violations == [] and sorted(mixed.cuts) == [1, 2, 3]


def test_every_cut_is_checked_against_the_source_history() -> None:
    timeline = SourceTimeline()
    for repo, head in (("features", "f0"), ("labels", "l0"), ("features", "f1"),
                       ("labels", "l1")):  # the pipeline: features, then labels
        timeline.moved(repo, "main", head)
    assert timeline.held_together({("features", "main"): "f1", ("labels", "main"): "l0"})
    assert not timeline.held_together({("features", "main"): "f0",
                                       ("labels", "main"): "l1"})
    torn = {**CUTS, 4: {"m-f": "f0", "m-l": "l1"}}  # new labels without new features
    checker = _checker(FakeDestination({"features": "f1", "labels": "l1"}), torn, timeline)
    checker.check()
    violations: list[InvariantViolation] = checker.violations
    assert checker.stats.cuts_checked == 4
    assert [str(v) for v in violations] == [
        "I8: group g: cut 4 holds features/main@f0, labels/main@l1, heads the source's "
        "member branches never had at one moment"]
