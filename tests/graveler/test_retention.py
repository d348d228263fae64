"""Which commits garbage collection rules keep: per branch, across branches, and for
commits no branch reaches."""

from __future__ import annotations

import pytest

from lakefs_core.errors import ValidationError
from lakefs_core.graveler.model import Commit, GarbageCollectionRules
from lakefs_core.graveler.retention import (
    commits_csv,
    garbage_collection_commits,
    validate_gc_rules,
)

DAY = 86_400
NOW = 1_000 * DAY


def _c(days_ago: float, *parents: str) -> Commit:
    return Commit(parents=parents, metarange_id="mr", message="", committer="",
                  creation_date=int(NOW - days_ago * DAY))


# root <- a (30d) <- b (20d) <- main (1d);  a <- dev (25d);  b <- gone (2d), no branch
COMMITS = {"root": _c(40), "a": _c(30, "root"), "b": _c(20, "a"), "main": _c(1, "b"),
           "dev": _c(25, "a"), "gone": _c(2, "b"), "old-gone": _c(50, "root")}
HEADS = {"main": "main", "dev": "dev"}


def test_each_branch_keeps_what_was_current_within_its_window() -> None:
    split = garbage_collection_commits(HEADS, COMMITS, GarbageCollectionRules(7), NOW)
    # main: its head and what the head replaced; dev: its head only; "gone" is younger
    # than the default retention although no branch reaches it
    assert split.retained == {"main", "b", "dev", "gone"}
    assert split.expired == {"root", "a", "old-gone"}


def test_the_longest_retention_of_the_branches_wins() -> None:
    rules = GarbageCollectionRules(7, {"dev": 28})
    split = garbage_collection_commits(HEADS, COMMITS, rules, NOW)
    assert split.retained == {"main", "b", "dev", "a", "gone"}
    rules = GarbageCollectionRules(0, {"main": 365})
    split = garbage_collection_commits(HEADS, COMMITS, rules, NOW)
    assert split.retained == {"main", "b", "a", "root", "dev"}
    assert split.expired == {"gone", "old-gone"}


def test_the_commits_csv_has_lakefs_columns_and_every_commit() -> None:
    split = garbage_collection_commits(HEADS, COMMITS, GarbageCollectionRules(7), NOW)
    lines = commits_csv(split, COMMITS).decode().splitlines()
    assert lines[0] == "commit_id,expired,metarange_id"
    assert sorted(lines[1:]) == sorted(
        [f"{c},false,mr" for c in split.retained] + [f"{c},true,mr" for c in split.expired])


@pytest.mark.parametrize(("default", "branches"), [
    (-1, []), (1, [("main", -1)]), (1, [("-bad", 1)]), (1, [("a", 1), ("a", 1)]),
    (2**31, []), (True, []),
])
def test_bad_rules_are_refused(default: int, branches: list[tuple[str, int]]) -> None:
    with pytest.raises(ValidationError):
        validate_gc_rules(default, branches)
