"""Several repositories' branches read at one snapshot and swapped in one transaction
(what a mirror group's cut needs), on SQLite, PostgreSQL and DynamoDB alike."""

from __future__ import annotations

import threading

import pytest

from lakefs_core.errors import BranchChangedError, RepositoryNotFoundError, ValidationError
from lakefs_core.graveler.model import Branch, BranchUpdate
from lakefs_core.refstore.base import MAX_BRANCHES_AT_ONCE, RefStore
from tests.refstore.test_refstore import new_repo


def test_get_branches_reads_several_repositories_and_leaves_out_the_missing(
        store: RefStore) -> None:
    new_repo(store, "a")
    new_repo(store, "b")
    store.create_branch("b", Branch("dev", "c9", "t9"))
    found = store.get_branches([("a", "main"), ("b", "dev"), ("b", "nope"), ("gone", "main"),
                                ("a", "main")])
    assert found == {("a", "main"): store.get_branch("a", "main"),
                     ("b", "dev"): Branch("dev", "c9", "t9")}
    assert store.get_branches([]) == {}
    with pytest.raises(ValidationError):
        store.get_branches([("a", f"b{i}") for i in range(MAX_BRANCHES_AT_ONCE + 1)])


def test_update_branches_moves_every_branch_together(store: RefStore) -> None:
    new_repo(store, "a")
    new_repo(store, "b")
    a, b = store.get_branch("a", "main"), store.get_branch("b", "main")
    store.update_branches([BranchUpdate("a", a, Branch("main", "a1", a.staging_token)),
                           BranchUpdate("b", b, Branch("main", "b1", b.staging_token)),
                           BranchUpdate("b", None, Branch("dev", "b1", "td"))])
    heads = store.get_branches([("a", "main"), ("b", "main"), ("b", "dev")])
    assert {k: v.commit_id for k, v in heads.items()} == {
        ("a", "main"): "a1", ("b", "main"): "b1", ("b", "dev"): "b1"}


def test_a_failed_swap_of_one_branch_moves_none(store: RefStore) -> None:
    new_repo(store, "a")
    new_repo(store, "b")
    a, b = store.get_branch("a", "main"), store.get_branch("b", "main")
    store.update_branch("b", b, Branch("main", "moved", b.staging_token))  # b moves first
    with pytest.raises(BranchChangedError):
        store.update_branches([BranchUpdate("a", a, Branch("main", "a1", a.staging_token)),
                               BranchUpdate("b", b, Branch("main", "b1", b.staging_token))])
    assert store.get_branch("a", "main") == a
    assert store.get_branch("b", "main").commit_id == "moved"
    # a branch to create that exists already: nothing moves either
    with pytest.raises(BranchChangedError):
        store.update_branches([BranchUpdate("a", a, Branch("main", "a1", a.staging_token)),
                               BranchUpdate("b", None, Branch("main", "b1", "t"))])
    assert store.get_branch("a", "main") == a
    # a branch to create in a repository that is gone
    with pytest.raises(RepositoryNotFoundError):
        store.update_branches([BranchUpdate("a", a, Branch("main", "a1", a.staging_token)),
                               BranchUpdate("gone", None, Branch("main", "x", "t"))])
    assert store.get_branch("a", "main") == a


def test_update_branches_refuses_bad_requests(store: RefStore) -> None:
    new_repo(store, "a")
    a = store.get_branch("a", "main")
    with pytest.raises(ValidationError):
        store.update_branches([BranchUpdate("a", a, Branch("other", "a1", "t"))])
    with pytest.raises(ValidationError):
        store.update_branches([BranchUpdate("a", a, Branch("main", "a1", "t")),
                               BranchUpdate("a", a, Branch("main", "a2", "t"))])
    store.update_branches([])
    assert store.get_branch("a", "main") == a


def test_a_reader_never_sees_one_branch_moved_without_the_other(store: RefStore) -> None:
    new_repo(store, "a")
    new_repo(store, "b")
    stop = threading.Event()
    seen: list[tuple[str, str]] = []

    def read() -> None:
        while not stop.is_set():
            heads = store.get_branches([("a", "main"), ("b", "main")])
            seen.append((heads[("a", "main")].commit_id, heads[("b", "main")].commit_id))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(1, 16):
            a, b = store.get_branch("a", "main"), store.get_branch("b", "main")
            store.update_branches([
                BranchUpdate("a", a, Branch("main", f"c{i}", a.staging_token)),
                BranchUpdate("b", b, Branch("main", f"c{i}", b.staging_token))])
    finally:
        stop.set()
        reader.join()
    assert seen and all(x == y for x, y in seen)
