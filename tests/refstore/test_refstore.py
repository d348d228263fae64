"""The refstore contract, run on SQLite, PostgreSQL and DynamoDB alike (see conftest)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import event

from lakefs_core.errors import (
    ActionRunNotFoundError,
    AlreadyExistsError,
    BranchChangedError,
    BranchExistsError,
    BranchNotFoundError,
    CommitNotFoundError,
    ConflictError,
    ImportNotFoundError,
    NonEmptyRepositoryError,
    PullRequestChangedError,
    PullRequestNotFoundError,
    ReadOnlyRepositoryError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.model import (
    ActionRun,
    AddressType,
    Branch,
    Commit,
    CommitRecord,
    Entry,
    EntryRecord,
    GarbageCollectionRules,
    HookRun,
    ImportState,
    MirrorMarking,
    PullRequest,
    PullRequestStatus,
    RefsDump,
    Repository,
    RepositoryTask,
    Tag,
    TaskKind,
)
from lakefs_core.refstore.base import RefStore
from lakefs_core.refstore.rows import prefix_end
from lakefs_core.refstore.sql import SQLRefStore
from tests.refstore.conftest import OpenStore

T = TypeVar("T")

#: names that sort differently by code point, by locale and case-insensitively
AWKWARD_NAMES = ["B", "a", "a-b", "a/b", "a_b", "a%b", "ab", "z", "ä", "é", "\U0001f600"]


def new_repo(store: RefStore, repo_id: str = "repo", branch: str = "main",
             **fields: Any) -> Repository:
    repo = Repository(id=repo_id, storage_namespace=f"local://ns/{repo_id}",
                      default_branch=branch, creation_date=1_700_000_000, **fields)
    store.create_repository(repo, Branch(name=branch, commit_id="c0", staging_token="t0"))
    return repo


def entry(n: int = 0, **fields: Any) -> Entry:
    values: dict[str, Any] = {"address": f"data/obj{n}", "size": n, "etag": f"etag{n}",
                              "mtime": 1_712_345_678.125 + n}
    values.update(fields)
    return Entry(**values)


def commit(message: str = "m", **fields: Any) -> Commit:
    values: dict[str, Any] = {"parents": ("p1",), "metarange_id": "mr", "message": message,
                              "committer": "alice", "creation_date": 1_700_000_001}
    values.update(fields)
    return Commit(**values)


# --- repositories -------------------------------------------------------------------
def test_create_and_get_repository(store: RefStore) -> None:
    repo = new_repo(store, "r1", branch="develop", storage_id="s3-west", read_only=True)
    assert store.get_repository("r1") == repo
    assert store.get_branch("r1", "develop") == Branch("develop", "c0", "t0")


def test_repository_exists_and_creation_is_atomic(store: RefStore) -> None:
    new_repo(store, "r1")
    again = Repository(id="r1", storage_namespace="local://other", default_branch="other",
                       creation_date=2)
    with pytest.raises(RepositoryExistsError):
        store.create_repository(again, Branch("other", "c9", "t9"))
    assert store.get_repository("r1").storage_namespace == "local://ns/r1"
    with pytest.raises(BranchNotFoundError):
        store.get_branch("r1", "other")


def test_create_repository_refuses_a_branch_that_is_not_the_default(store: RefStore) -> None:
    repo = Repository(id="r1", storage_namespace="local://x", default_branch="main",
                      creation_date=1)
    with pytest.raises(ValidationError):
        store.create_repository(repo, Branch("dev", "c0", "t0"))
    with pytest.raises(RepositoryNotFoundError):
        store.get_repository("r1")


def test_get_missing_repository(store: RefStore) -> None:
    with pytest.raises(RepositoryNotFoundError):
        store.get_repository("nope")


def test_list_repositories_pagination(store: RefStore) -> None:
    ids = ["alpha", "alpha-2", "alphabet", "beta", "gamma", "ALPHA"]
    for repo_id in ids:
        new_repo(store, repo_id)
    assert [r.id for r in store.list_repositories()] == sorted(ids)
    assert [r.id for r in store.list_repositories(prefix="alpha")] == [
        "alpha", "alpha-2", "alphabet"]
    assert [r.id for r in store.list_repositories(prefix="alpha", after="alpha")] == [
        "alpha-2", "alphabet"]
    assert [r.id for r in store.list_repositories(after="alphabet", amount=1)] == ["beta"]
    assert store.list_repositories(amount=0) == []
    assert store.list_repositories(prefix="delta") == []
    with pytest.raises(ValidationError):
        store.list_repositories(amount=-1)


def test_update_repository(store: RefStore) -> None:
    repo = new_repo(store, "r1")
    store.update_repository(replace(repo, read_only=True))
    assert store.get_repository("r1") == replace(repo, read_only=True)
    store.update_repository(repo)
    assert store.get_repository("r1").read_only is False
    with pytest.raises(RepositoryNotFoundError):
        store.update_repository(replace(repo, id="nope"))


def test_delete_repository_removes_everything_of_it(store: RefStore) -> None:
    for repo_id in ("doomed", "kept"):
        new_repo(store, repo_id)
        store.create_branch(repo_id, Branch("dev", "c1", "t1"))
        store.create_tag(repo_id, Tag("v1", "c1"))
        store.put_commit(repo_id, "c1", commit())
        store.put_staged(repo_id, "t1", EntryRecord("a", entry()))
        store.set_branch_protection_rules(repo_id, ["main"])
        store.set_branch_hidden(repo_id, "dev", True)
        store.set_mirror_marking(repo_id, MirrorMarking("m1", "east", "src"))
        store.mark_commit_present(repo_id, "c1")
        store.set_repository_metadata(repo_id, {"k": "v"})
        store.set_gc_rules(repo_id, GarbageCollectionRules(3, {"dev": 1}))
        store.put_task(repo_id, RepositoryTask("t", TaskKind.DUMP, True, 1.0))

    store.delete_repository("doomed")

    with pytest.raises(RepositoryNotFoundError):
        store.get_repository("doomed")
    assert store.list_branches("doomed") == []
    assert store.list_tags("doomed") == []
    with pytest.raises(CommitNotFoundError):
        store.get_commit("doomed", "c1")
    assert not store.has_staged("doomed", "t1")
    assert store.get_branch_protection_rules("doomed") == ()
    assert not store.is_branch_hidden("doomed", "dev")
    assert store.get_mirror_marking("doomed") is None
    assert not store.is_commit_present("doomed", "c1")
    assert store.get_gc_rules("doomed") is None
    assert store.get_task("doomed", "t") is None
    # the same id can be used again, from scratch
    new_repo(store, "doomed")
    assert store.get_repository_metadata("doomed") == {}
    assert [b.name for b in store.list_branches("doomed")] == ["main"]

    assert [b.name for b in store.list_branches("kept")] == ["dev", "main"]
    assert store.get_tag("kept", "v1") == Tag("v1", "c1")
    assert store.get_commit("kept", "c1") == commit()
    assert store.get_staged("kept", "t1", "a") == EntryRecord("a", entry())
    assert store.get_branch_protection_rules("kept") == ("main",)
    assert store.is_branch_hidden("kept", "dev")
    assert store.get_mirror_marking("kept") == MirrorMarking("m1", "east", "src")
    assert store.is_commit_present("kept", "c1")
    assert store.get_repository_metadata("kept") == {"k": "v"}
    assert store.get_gc_rules("kept") == GarbageCollectionRules(3, {"dev": 1})
    assert store.get_task("kept", "t") == RepositoryTask("t", TaskKind.DUMP, True, 1.0)

    with pytest.raises(RepositoryNotFoundError):
        store.delete_repository("never-was")



def test_no_commit_or_staged_entry_outlives_its_repository(store: RefStore) -> None:
    new_repo(store, "doomed")
    store.delete_repository("doomed")
    with pytest.raises(RepositoryNotFoundError):
        store.put_commit("doomed", "c1", commit())
    with pytest.raises(RepositoryNotFoundError):
        store.put_staged("doomed", "t1", EntryRecord("a", entry()))
    # the first commit is written with the repository, or not at all
    repo = new_repo(store, "taken")
    with pytest.raises(RepositoryExistsError):
        store.create_repository(repo, Branch("main", "c9", "t9"),
                                initial_commit=("c9", commit("first")))
    with pytest.raises(CommitNotFoundError):
        store.get_commit("taken", "c9")
    fresh = replace(repo, id="fresh")
    store.create_repository(fresh, Branch("main", "c9", "t9"),
                            initial_commit=("c9", commit("first")))
    assert store.get_commit("fresh", "c9") == commit("first")


def test_a_commit_racing_a_repository_deletion_is_deleted_or_refused(
        store: RefStore) -> None:
    """Commits and staged entries have no foreign key: writes of them and a deletion of
    their repository are serialized on the repository row."""
    for round_ in range(20):
        repo_id = f"racing{round_}"
        new_repo(store, repo_id)
        barrier = threading.Barrier(3)

        def write(repo: str = repo_id, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            for i in range(5):
                with contextlib.suppress(RepositoryNotFoundError):
                    store.put_commit(repo, f"c{i}", commit())
                    store.put_staged(repo, "t1", EntryRecord(f"p{i}", entry(i)))

        def delete(repo: str = repo_id, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            store.delete_repository(repo)

        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(write), pool.submit(delete)]
            barrier.wait()
            for f in futures:
                f.result()
        assert not store.has_staged(repo_id, "t1")
        assert store.find_commit_ids(repo_id, "c", limit=10) == []

# --- repository metadata and settings -------------------------------------------------
def test_repository_metadata(store: RefStore) -> None:
    new_repo(store, "r1")
    assert store.get_repository_metadata("r1") == {}
    store.set_repository_metadata("r1", {"a": "1", "b": "2"})
    store.set_repository_metadata("r1", {"b": "3", "ü": "ñ"})
    assert store.get_repository_metadata("r1") == {"a": "1", "b": "3", "ü": "ñ"}
    store.delete_repository_metadata("r1", ["a", "missing"])
    assert store.get_repository_metadata("r1") == {"b": "3", "ü": "ñ"}
    store.set_repository_metadata("r1", {})
    store.delete_repository_metadata("r1", [])
    assert store.get_repository_metadata("r1") == {"b": "3", "ü": "ñ"}


def test_repository_metadata_of_missing_repository(store: RefStore) -> None:
    with pytest.raises(RepositoryNotFoundError):
        store.get_repository_metadata("nope")
    with pytest.raises(RepositoryNotFoundError):
        store.set_repository_metadata("nope", {"a": "1"})
    with pytest.raises(RepositoryNotFoundError):
        store.set_repository_metadata("nope", {})
    with pytest.raises(RepositoryNotFoundError):
        store.delete_repository_metadata("nope", ["a"])


def test_branch_protection_rules(store: RefStore) -> None:
    new_repo(store, "r1")
    new_repo(store, "r2")
    assert store.get_branch_protection_rules("r1") == ()
    store.set_branch_protection_rules("r1", ["main"])
    store.set_branch_protection_rules("r1", ["main", "release-*"])
    assert store.get_branch_protection_rules("r1") == ("main", "release-*")
    assert store.get_branch_protection_rules("r2") == ()
    store.set_branch_protection_rules("r1", [])
    assert store.get_branch_protection_rules("r1") == ()
    with pytest.raises(RepositoryNotFoundError):
        store.set_branch_protection_rules("nope", [])
    assert store.get_branch_protection_rules("nope") == ()


def test_hidden_branches(store: RefStore) -> None:
    new_repo(store, "r1")
    store.create_branch("r1", Branch("dev", "c1", "t1"))
    assert not store.is_branch_hidden("r1", "dev")
    store.set_branch_hidden("r1", "dev", True)
    store.set_branch_hidden("r1", "dev", True)  # idempotent
    assert store.is_branch_hidden("r1", "dev") and not store.is_branch_hidden("r1", "main")
    store.set_branch_hidden("r1", "dev", False)
    assert not store.is_branch_hidden("r1", "dev")
    store.set_branch_hidden("r1", "dev", True)
    store.delete_branch("r1", "dev")  # a deleted branch's mark goes with it
    assert not store.is_branch_hidden("r1", "dev")
    with pytest.raises(RepositoryNotFoundError):
        store.set_branch_hidden("nope", "dev", True)


def test_branch_expiries(store: RefStore) -> None:
    new_repo(store, "r1")
    for name in ("a", "b", "c", "gone"):
        store.create_branch("r1", Branch(name, "c1", f"t-{name}"))
    assert store.get_branch_expiry("r1", "a") is None
    store.set_branch_expiry("r1", "b", 200)
    store.set_branch_expiry("r1", "a", 100)
    store.set_branch_expiry("r1", "c", 300)
    store.set_branch_expiry("r1", "main", 50)  # a default branch is never listed
    store.set_branch_expiry("r1", "gone", 150)
    store.delete_branch("r1", "gone")  # a deleted branch's expiry goes with it
    assert store.get_branch_expiry("r1", "gone") is None
    assert store.get_branch_expiry("r1", "a") == 100
    assert store.list_expired_branches(99) == []
    assert store.list_expired_branches(200) == [("r1", "a"), ("r1", "b")]
    assert store.list_expired_branches(1000, amount=1) == [("r1", "a")]
    store.set_branch_expiry("r1", "a", None)
    store.set_branch_expiry("r1", "c", 150)  # replaced
    assert store.list_expired_branches(200) == [("r1", "c"), ("r1", "b")]
    store.update_repository(replace(store.get_repository("r1"), read_only=True))
    assert store.list_expired_branches(200) == []  # a read-only repository's: none
    with pytest.raises(RepositoryNotFoundError):
        store.set_branch_expiry("nope", "dev", 1)


def test_mirror_marking_and_present_commits(store: RefStore) -> None:
    new_repo(store, "r1")
    assert store.get_mirror_marking("r1") is None
    store.set_mirror_marking("r1", MirrorMarking("m1", "east", "src"))
    store.set_mirror_marking("r1", MirrorMarking("m1", "east", "src", detached=True))
    assert store.get_mirror_marking("r1") == MirrorMarking("m1", "east", "src", detached=True)
    assert not store.is_commit_present("r1", "c1")
    store.mark_commit_present("r1", "c1")
    store.mark_commit_present("r1", "c1")  # idempotent
    assert store.is_commit_present("r1", "c1") and not store.is_commit_present("r1", "c2")
    with pytest.raises(RepositoryNotFoundError):
        store.set_mirror_marking("nope", MirrorMarking("m1", "east", "src"))
    with pytest.raises(RepositoryNotFoundError):
        store.mark_commit_present("nope", "c1")


def test_pull_requests(store: RefStore) -> None:
    new_repo(store, "r1")
    new_repo(store, "r2")
    prs = [PullRequest(id=f"pr{i}", title=f"t{i}", description="ünïcode", author="alice",
                       status=PullRequestStatus.OPEN, source_branch="dev",
                       destination_branch="main", creation_date=1_700_000_000.5 + i)
           for i in range(3)]
    for pr in prs:
        store.create_pull_request("r1", pr)
    with pytest.raises(AlreadyExistsError):
        store.create_pull_request("r1", prs[0])
    with pytest.raises(RepositoryNotFoundError):
        store.create_pull_request("nope", prs[0])
    assert store.get_pull_request("r1", "pr1") == prs[1]
    with pytest.raises(PullRequestNotFoundError):
        store.get_pull_request("r2", "pr1")  # per repository

    closed = replace(prs[1], status=PullRequestStatus.CLOSED, closed_date=1_700_000_100.0)
    store.update_pull_request("r1", prs[1], closed)
    assert store.get_pull_request("r1", "pr1") == closed
    with pytest.raises(PullRequestChangedError):  # its status is no longer open
        store.update_pull_request("r1", prs[1], replace(prs[1], title="stale"))
    with pytest.raises(PullRequestNotFoundError):
        store.update_pull_request("r2", prs[1], closed)

    open_only = frozenset({PullRequestStatus.OPEN})
    assert [p.id for p in store.list_pull_requests("r1")] == ["pr0", "pr1", "pr2"]
    assert [p.id for p in store.list_pull_requests("r1", statuses=open_only)] == ["pr0", "pr2"]
    assert [p.id for p in store.list_pull_requests("r1", after="pr0", amount=1)] == ["pr1"]
    assert store.list_pull_requests("r2") == []
    store.delete_repository("r1")  # its pull requests go with it
    new_repo(store, "r1")
    assert store.list_pull_requests("r1") == []


def test_legacy_settings_are_migrated(tmp_path: Path) -> None:
    """A database of an earlier version keeps its rules, marks and markings."""
    import sqlite3

    path = tmp_path / "old.db"
    with SQLRefStore(f"sqlite:///{path}") as store:
        new_repo(store, "r1")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE settings (repo TEXT, key TEXT, value TEXT, "
                 "PRIMARY KEY (repo, key))")
    conn.executemany("INSERT INTO settings VALUES (?, ?, ?)", [
        ("r1", "branch_protection_rules", '["main"]'),
        ("r1", "mirror", '{"mirror_id": "m1", "source_region": "east", '
                         '"source_repository": "src"}'),
        ("r1", "mirror-present/c1", "1"),
        ("r1", "hidden_branch/main", "true"),
        ("r1", "hidden_branch/dev", "false"),
    ])
    conn.commit()
    conn.close()
    with SQLRefStore(f"sqlite:///{path}") as store:
        assert store.get_branch_protection_rules("r1") == ("main",)
        assert store.get_mirror_marking("r1") == MirrorMarking("m1", "east", "src")
        assert store.is_commit_present("r1", "c1")
        assert store.is_branch_hidden("r1", "main")
        assert not store.is_branch_hidden("r1", "dev")
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "settings" not in tables


# --- branches ---------------------------------------------------------------------------
def test_branch_lifecycle(store: RefStore) -> None:
    new_repo(store, "r1")
    dev = Branch("dev", "c1", "t1", sealed_tokens=("t0", "tx"), sealed_at=1712.5)
    store.create_branch("r1", dev)
    assert store.get_branch("r1", "dev") == dev
    with pytest.raises(BranchExistsError):
        store.create_branch("r1", Branch("dev", "c2", "t2"))
    assert store.get_branch("r1", "dev") == dev
    store.delete_branch("r1", "dev")
    with pytest.raises(BranchNotFoundError):
        store.get_branch("r1", "dev")
    with pytest.raises(BranchNotFoundError):
        store.delete_branch("r1", "dev")


def test_branch_of_missing_repository(store: RefStore) -> None:
    with pytest.raises(RepositoryNotFoundError):
        store.create_branch("nope", Branch("dev", "c1", "t1"))
    with pytest.raises(BranchNotFoundError):
        store.get_branch("nope", "main")
    assert store.list_branches("nope") == []


def test_branches_are_per_repository(store: RefStore) -> None:
    new_repo(store, "r1")
    new_repo(store, "r2")
    store.create_branch("r1", Branch("dev", "c1", "t1"))
    with pytest.raises(BranchNotFoundError):
        store.get_branch("r2", "dev")
    store.create_branch("r2", Branch("dev", "c2", "t2"))
    assert store.get_branch("r1", "dev").commit_id == "c1"


def test_list_branches_pagination_and_order(store: RefStore) -> None:
    new_repo(store, "r1", branch="main")
    for name in AWKWARD_NAMES:
        store.create_branch("r1", Branch(name, "c", "t"))
    names = sorted([*AWKWARD_NAMES, "main"])
    assert [b.name for b in store.list_branches("r1")] == names
    # % and _ in a prefix are literal characters, and prefixes are case-sensitive
    assert [b.name for b in store.list_branches("r1", prefix="a_")] == ["a_b"]
    assert [b.name for b in store.list_branches("r1", prefix="a%")] == ["a%b"]
    assert [b.name for b in store.list_branches("r1", prefix="a")] == [
        "a", "a%b", "a-b", "a/b", "a_b", "ab"]
    assert [b.name for b in store.list_branches("r1", prefix="a", after="a/b")] == [
        "a_b", "ab"]
    assert [b.name for b in store.list_branches("r1", prefix="b")] == []
    assert [b.name for b in store.list_branches("r1", after="z")] == ["ä", "é", "\U0001f600"]
    pages: list[str] = []
    after = ""
    while page := store.list_branches("r1", after=after, amount=3):
        assert len(page) <= 3
        pages.extend(b.name for b in page)
        after = page[-1].name
    assert pages == names


# --- compare-and-swap ----------------------------------------------------------------------
def test_update_branch_swaps_when_unchanged(store: RefStore) -> None:
    new_repo(store, "r1")
    current = store.get_branch("r1", "main")
    sealed = Branch("main", "c0", "t1", sealed_tokens=("t0",), sealed_at=99.5)
    store.update_branch("r1", current, sealed)
    assert store.get_branch("r1", "main") == sealed
    landed = Branch("main", "c1", "t1")
    store.update_branch("r1", sealed, landed)
    assert store.get_branch("r1", "main") == landed


@pytest.mark.parametrize("stale", [
    {"commit_id": "other"},
    {"staging_token": "other"},
    {"sealed_tokens": ("t0",)},
    {"sealed_tokens": ("b", "a")},  # same tokens, other order
])
def test_update_branch_refuses_a_stale_expectation(store: RefStore,
                                                    stale: dict[str, Any]) -> None:
    new_repo(store, "r1")
    current = Branch("main", "c1", "t1", sealed_tokens=("a", "b"))
    store.update_branch("r1", store.get_branch("r1", "main"), current)
    with pytest.raises(BranchChangedError):
        store.update_branch("r1", replace(current, **stale), Branch("main", "c2", "t2"))
    assert store.get_branch("r1", "main") == current


def test_update_branch_ignores_sealed_at_in_the_comparison(store: RefStore) -> None:
    new_repo(store, "r1")
    current = store.get_branch("r1", "main")
    store.update_branch("r1", replace(current, sealed_at=123.0), replace(current, commit_id="c1"))
    assert store.get_branch("r1", "main").commit_id == "c1"


def test_update_branch_of_deleted_branch(store: RefStore) -> None:
    new_repo(store, "r1")
    store.create_branch("r1", Branch("dev", "c1", "t1"))
    stale = store.get_branch("r1", "dev")
    store.delete_branch("r1", "dev")
    with pytest.raises(BranchNotFoundError):
        store.update_branch("r1", stale, replace(stale, commit_id="c2"))
    with pytest.raises(BranchNotFoundError):
        store.update_branch("nope", stale, replace(stale, commit_id="c2"))


def test_update_branch_cannot_rename(store: RefStore) -> None:
    new_repo(store, "r1")
    current = store.get_branch("r1", "main")
    with pytest.raises(ValidationError):
        store.update_branch("r1", current, replace(current, name="other"))


def test_a_writable_swap_is_refused_once_the_repository_is_read_only(store: RefStore) -> None:
    new_repo(store, "r1")
    current = store.get_branch("r1", "main")
    moved = replace(current, commit_id="c1")
    store.update_branch("r1", current, moved, writable=True)
    store.update_repository(replace(store.get_repository("r1"), read_only=True))
    with pytest.raises(ReadOnlyRepositoryError):
        store.update_branch("r1", moved, replace(moved, commit_id="c2"), writable=True)
    assert store.get_branch("r1", "main") == moved
    # replication moves a read-only mirror's branches
    store.update_branch("r1", moved, replace(moved, commit_id="c2"))
    assert store.get_branch("r1", "main").commit_id == "c2"
    with pytest.raises(RepositoryNotFoundError):
        store.update_branch("nope", moved, replace(moved, commit_id="c3"), writable=True)


def test_no_writable_swap_lands_after_a_freeze_returns(store: RefStore) -> None:
    """Writers race a freeze (a switchover making the repository read-only): once the
    freeze has returned, the branch never moves again, and every writer is refused."""
    new_repo(store, "r1")

    def writer() -> bool:
        """Move the branch until refused (True), or give up after many tries."""
        for i in range(20_000):
            branch = store.get_branch("r1", "main")
            try:
                store.update_branch("r1", branch, replace(
                    branch, commit_id=f"c{i}-{threading.get_ident()}"), writable=True)
            except BranchChangedError:
                continue
            except ReadOnlyRepositoryError:
                return True
        return False

    with ThreadPoolExecutor(2) as pool:
        writers = [pool.submit(writer) for _ in range(2)]
        while store.get_branch("r1", "main").commit_id == "c0":
            pass  # the writers are under way
        store.update_repository(replace(store.get_repository("r1"), read_only=True))
        after_freeze = store.get_branch("r1", "main")
        wait(writers)
    assert [w.result() for w in writers] == [True, True]
    assert store.get_branch("r1", "main") == after_freeze


def run_in_threads(count: int, work: Callable[[], T]) -> list[T]:
    """Run ``work`` in ``count`` threads released at once; re-raise the first failure."""
    barrier = threading.Barrier(count)

    def start() -> T:
        barrier.wait()
        return work()

    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(start) for _ in range(count)]
        wait(futures)
    return [f.result() for f in futures]


def test_concurrent_compare_and_swap_loses_no_update(store: RefStore) -> None:
    threads, increments = 8, 25
    new_repo(store, "r1")
    store.update_branch("r1", store.get_branch("r1", "main"), Branch("main", "0", "t0"))

    def increment_repeatedly() -> None:
        for _ in range(increments):
            for _attempt in range(10_000):
                seen = store.get_branch("r1", "main")
                try:
                    store.update_branch(
                        "r1", seen, replace(seen, commit_id=str(int(seen.commit_id) + 1)))
                    break
                except BranchChangedError:
                    continue
            else:
                raise AssertionError("compare-and-swap never succeeded")

    run_in_threads(threads, increment_repeatedly)
    assert store.get_branch("r1", "main").commit_id == str(threads * increments)


# --- tags ------------------------------------------------------------------------------------
def test_tags(store: RefStore) -> None:
    new_repo(store, "r1")
    for name in AWKWARD_NAMES:
        store.create_tag("r1", Tag(name, f"commit-{name}"))
    assert store.get_tag("r1", "a_b") == Tag("a_b", "commit-a_b")
    with pytest.raises(TagExistsError):
        store.create_tag("r1", Tag("a_b", "other"))
    assert store.get_tag("r1", "a_b").commit_id == "commit-a_b"
    assert [t.name for t in store.list_tags("r1")] == sorted(AWKWARD_NAMES)
    assert [t.name for t in store.list_tags("r1", prefix="a_")] == ["a_b"]
    assert [t.name for t in store.list_tags("r1", prefix="a", after="a%b", amount=2)] == [
        "a-b", "a/b"]
    store.delete_tag("r1", "a_b")
    with pytest.raises(TagNotFoundError):
        store.get_tag("r1", "a_b")
    with pytest.raises(TagNotFoundError):
        store.delete_tag("r1", "a_b")
    with pytest.raises(RepositoryNotFoundError):
        store.create_tag("nope", Tag("v1", "c1"))
    assert store.list_tags("nope") == []


# --- commits ------------------------------------------------------------------------------------
def test_garbage_collection_rules(store: RefStore) -> None:
    new_repo(store, "r1")
    new_repo(store, "r2")
    assert store.get_gc_rules("r1") is None
    store.set_gc_rules("r1", GarbageCollectionRules(21, {"main": 28, "dev": 0, "ä": 2}))
    assert store.get_gc_rules("r1") == GarbageCollectionRules(21, {"main": 28, "dev": 0,
                                                                   "ä": 2})
    store.set_gc_rules("r1", GarbageCollectionRules(7))  # replaces, branch rules too
    assert store.get_gc_rules("r1") == GarbageCollectionRules(7, {})
    assert store.get_gc_rules("r2") is None
    store.set_gc_rules("r1", None)
    assert store.get_gc_rules("r1") is None
    with pytest.raises(RepositoryNotFoundError):
        store.set_gc_rules("nope", GarbageCollectionRules(1))
    assert store.get_gc_rules("nope") is None


def test_repository_tasks(store: RefStore) -> None:
    new_repo(store, "r1")
    started = RepositoryTask("t1", TaskKind.RESTORE, False, 1.5, refs=RefsDump("c", "t", "b"))
    store.put_task("r1", started)
    assert store.get_task("r1", "t1") == started
    finished = RepositoryTask("t1", TaskKind.RESTORE, True, 2.5, error="broken",
                              refs=RefsDump("c", "t", "b"))
    store.put_task("r1", finished)
    assert store.get_task("r1", "t1") == finished
    store.put_task("r1", RepositoryTask("t2", TaskKind.DUMP, False, 3.0))
    assert store.get_task("r1", "t2") == RepositoryTask("t2", TaskKind.DUMP, False, 3.0)
    assert store.get_task("r1", "t3") is None and store.get_task("r2", "t1") is None
    with pytest.raises(RepositoryNotFoundError):
        store.put_task("nope", started)


def test_link_addresses(store: RefStore) -> None:
    for repo_id in ("r1", "r2"):
        new_repo(store, repo_id)
    store.put_link_address("r1", "s3://b/r1/data/old", expires_at=10.0, now=5.0)
    store.put_link_address("r1", "s3://b/r1/data/kept", expires_at=30.0, now=5.0)
    store.put_link_address("r2", "s3://b/r2/data/other", expires_at=10.0, now=5.0)
    # a later handout drops the repository's records that expired before it
    store.put_link_address("r1", "s3://b/r1/data/new", expires_at=50.0, now=20.0)
    assert store.take_link_address("r1", "s3://b/r1/data/old") is None
    # a record is taken once, and only for its repository
    assert store.take_link_address("r2", "s3://b/r1/data/kept") is None
    assert store.get_link_address("r1", "s3://b/r1/data/kept") == 30.0  # looked at ...
    assert store.get_link_address("r2", "s3://b/r1/data/kept") is None
    assert store.take_link_address("r1", "s3://b/r1/data/kept") == 30.0  # ... then taken
    assert store.take_link_address("r1", "s3://b/r1/data/kept") is None
    assert store.get_link_address("r1", "s3://b/r1/data/kept") is None
    assert store.take_link_address("r2", "s3://b/r2/data/other") == 10.0
    with pytest.raises(RepositoryNotFoundError):
        store.put_link_address("nope", "s3://b/x", expires_at=1.0, now=0.0)
    # records go with their repository
    store.delete_repository("r1")
    new_repo(store, "r1")
    assert store.take_link_address("r1", "s3://b/r1/data/new") is None


def test_list_commits_pages_by_id(store: RefStore) -> None:
    ids = sorted(f"{n:03d}" for n in range(7))
    for repo_id in ("r1", "r2"):
        new_repo(store, repo_id)
    for n, commit_id in enumerate(reversed(ids)):
        store.put_commit("r1", commit_id, commit(str(n)))
    store.put_commit("r2", "000", commit())
    first = store.list_commits("r1", amount=3)
    assert [c.id for c in first] == ids[:3]
    assert first[0] == CommitRecord("000", commit("6"))
    assert [c.id for c in store.list_commits("r1", after=ids[2], amount=3)] == ids[3:6]
    assert [c.id for c in store.list_commits("r1", after=ids[5])] == ids[6:]
    assert store.list_commits("r3") == []


def test_commit_round_trip(store: RefStore) -> None:
    for repo_id in ("r1", "r2"):
        new_repo(store, repo_id)
    record = commit("first line\nsecond: ünïcödé ✓", parents=("a" * 64, "b" * 64),
                    metadata={"z": "1", "a": "", "κλειδί": "τιμή", "quote": '"{}"'},
                    generation=7, creation_date=2**40)
    store.put_commit("r1", "c1", record)
    assert store.get_commit("r1", "c1") == record
    root = commit(parents=(), metadata={})
    store.put_commit("r1", "c0", root)
    assert store.get_commit("r1", "c0") == root
    with pytest.raises(CommitNotFoundError):
        store.get_commit("r1", "c2")
    with pytest.raises(CommitNotFoundError):
        store.get_commit("r2", "c1")


def test_put_commit_is_idempotent(store: RefStore) -> None:
    new_repo(store, "r1")
    store.put_commit("r1", "c1", commit("original"))
    store.put_commit("r1", "c1", commit("original"))
    store.put_commit("r1", "c1", commit("a later write of the same id"))
    assert store.get_commit("r1", "c1") == commit("original")


def test_find_commit_ids(store: RefStore) -> None:
    for repo_id in ("r1", "r2"):
        new_repo(store, repo_id)
    ids = ["abc123", "abc456", "abd000", "ab_000", "ab%000", "ABC999", "fff"]
    for commit_id in ids:
        store.put_commit("r1", commit_id, commit())
    store.put_commit("r2", "abc789", commit())
    assert store.find_commit_ids("r1", "abc") == ["abc123", "abc456"]
    assert store.find_commit_ids("r1", "abc", limit=10) == ["abc123", "abc456"]
    assert store.find_commit_ids("r1", "abc4") == ["abc456"]
    assert store.find_commit_ids("r1", "ab", limit=1) == ["ab%000"]
    assert store.find_commit_ids("r1", "ab_") == ["ab_000"]
    assert store.find_commit_ids("r1", "ab%") == ["ab%000"]
    assert store.find_commit_ids("r1", "ABC") == ["ABC999"]
    assert store.find_commit_ids("r1", "abc1234") == []
    assert store.find_commit_ids("r1", "x") == []
    assert store.find_commit_ids("r3", "abc") == []


# --- staging -------------------------------------------------------------------------------------
def test_staged_entry_round_trip(store: RefStore) -> None:
    new_repo(store, "r1")
    full = entry(1, address="s3://bucket/imported/a.parquet", address_type=AddressType.FULL,
                 size=2**42, mtime=1_712_345_678.123456789, content_type="application/x-parquet",
                 metadata={"owner": "ünïcödé", "empty": "", "json": '{"a": [1]}', "B": "x"})
    store.put_staged("r1", "t1", EntryRecord("dir/a.parquet", full))
    got = store.get_staged("r1", "t1", "dir/a.parquet")
    assert got == EntryRecord("dir/a.parquet", full)
    assert got is not None and got.entry is not None
    assert got.entry.address_type is AddressType.FULL
    assert got.entry.mtime == 1_712_345_678.123456789
    plain = entry(2)
    store.put_staged("r1", "t1", EntryRecord("b", plain))
    assert store.get_staged("r1", "t1", "b") == EntryRecord("b", plain)


def test_staging_on_a_branch_writes_nothing_without_the_branch(store: RefStore) -> None:
    """Staging on a branch that is not there (deleted since it was read) raises, and the
    record is not left behind under the token; on the branch, the branch comes back."""
    new_repo(store)
    with pytest.raises(BranchNotFoundError, match="'gone' not found"):
        store.stage_on_branch("repo", "gone", "t9", EntryRecord("a", entry(1)))
    assert not store.has_staged("repo", "t9")
    with pytest.raises(RepositoryNotFoundError):
        store.stage_on_branch("nope", "main", "t0", EntryRecord("a", entry(1)))
    assert not store.has_staged("nope", "t0")
    branch = store.stage_on_branch("repo", "main", "t0", EntryRecord("a", entry(2)))
    assert branch == store.get_branch("repo", "main")
    assert store.get_staged("repo", "t0", "a") == EntryRecord("a", entry(2))


def test_staging_replace_tombstone_and_undo(store: RefStore) -> None:
    new_repo(store, "r1")
    assert store.get_staged("r1", "t1", "a") is None
    assert not store.has_staged("r1", "t1")
    store.put_staged("r1", "t1", EntryRecord("a", entry(1)))
    store.put_staged("r1", "t1", EntryRecord("a", entry(2)))
    assert store.get_staged("r1", "t1", "a") == EntryRecord("a", entry(2))
    store.put_staged("r1", "t1", EntryRecord("a", None))
    assert store.get_staged("r1", "t1", "a") == EntryRecord("a", None)
    assert store.has_staged("r1", "t1")
    store.put_staged("r1", "t1", EntryRecord("a", entry(3)))
    assert store.get_staged("r1", "t1", "a") == EntryRecord("a", entry(3))
    store.delete_staged("r1", "t1", "a")
    store.delete_staged("r1", "t1", "never-staged")
    assert store.get_staged("r1", "t1", "a") is None
    assert not store.has_staged("r1", "t1")


def test_staging_tokens_and_repositories_are_isolated(store: RefStore) -> None:
    for repo_id in ("r1", "r2"):
        new_repo(store, repo_id)
    store.put_staged("r1", "t1", EntryRecord("a", entry(1)))
    store.put_staged("r1", "t2", EntryRecord("a", entry(2)))
    store.put_staged("r2", "t1", EntryRecord("a", None))
    assert store.get_staged("r1", "t1", "a") == EntryRecord("a", entry(1))
    assert store.get_staged("r1", "t2", "a") == EntryRecord("a", entry(2))
    assert store.get_staged("r2", "t1", "a") == EntryRecord("a", None)
    store.drop_staging("r1", "t1")
    assert not store.has_staged("r1", "t1")
    assert list(store.list_staged("r1", "t1")) == []
    assert store.has_staged("r1", "t2")
    assert store.has_staged("r2", "t1")


def test_list_staged_prefix_after_and_order(store: RefStore) -> None:
    new_repo(store, "r1")
    paths = [f"dir/{name}" for name in AWKWARD_NAMES] + ["dir", "dir0", "dj", "Dir/x"]
    for i, path in enumerate(paths):
        store.put_staged("r1", "t1", EntryRecord(path, None if i % 2 else entry(i)))
    assert [r.path for r in store.list_staged("r1", "t1")] == sorted(paths)
    under = sorted(p for p in paths if p.startswith("dir/"))
    assert [r.path for r in store.list_staged("r1", "t1", prefix="dir/")] == under
    assert [r.path for r in store.list_staged("r1", "t1", prefix="dir/a_")] == ["dir/a_b"]
    assert [r.path for r in store.list_staged("r1", "t1", prefix="dir/", after="dir/z")] == [
        "dir/ä", "dir/é", "dir/\U0001f600"]
    assert [r.path for r in store.list_staged("r1", "t1", after="dir0")] == ["dj"]
    by_path = {r.path: r for r in store.list_staged("r1", "t1")}
    assert by_path["dir/B"] == EntryRecord("dir/B", entry(0))
    assert by_path["dir/a"] == EntryRecord("dir/a", None)


def _count_page_reads(store: RefStore) -> tuple[list[str], Callable[[], None]]:
    """Record each read of a page of staged entries (an SQL SELECT, a DynamoDB Query);
    the second value stops recording."""
    reads: list[str] = []
    if isinstance(store, SQLRefStore):
        def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.lstrip().upper().startswith("SELECT") and "staged_entries" in statement:
                reads.append(statement)

        event.listen(store.engine, "before_cursor_execute", on_execute)
        return reads, lambda: event.remove(store.engine, "before_cursor_execute", on_execute)

    def on_query(params: dict[str, Any], **kwargs: Any) -> None:
        reads.append(str(params.get("KeyConditionExpression")))

    events = store.client.meta.events  # type: ignore[attr-defined]
    events.register("provide-client-params.dynamodb.Query", on_query)
    return reads, lambda: events.unregister("provide-client-params.dynamodb.Query", on_query)


def test_list_staged_streams_in_pages(open_store: OpenStore) -> None:
    store = open_store(page_size=100)
    new_repo(store, "r1")
    total = 260
    expected: list[EntryRecord] = []
    for i in range(total):
        record = EntryRecord(f"data/part-{i:05d}", None if i % 3 == 0 else entry(i))
        store.put_staged("r1", "t1", record)
        expected.append(record)
    reads, stop = _count_page_reads(store)
    try:
        stream: Iterator[EntryRecord] = store.list_staged("r1", "t1")
        first = next(stream)
        assert len(reads) == 1  # the first page is fetched ...
        if isinstance(store, SQLRefStore):  # ... and its connection is back in the pool
            assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        rest = list(stream)
    finally:
        stop()
    assert [first, *rest] == expected
    assert len(reads) == 3  # 100 + 100 + 60 rows
    tail = list(store.list_staged("r1", "t1", prefix="data/part-002", after="data/part-00249"))
    assert tail == expected[250:260]


def test_list_staged_with_an_exact_page_multiple(open_store: OpenStore) -> None:
    store = open_store(page_size=2)
    new_repo(store, "r1")
    for i in range(4):
        store.put_staged("r1", "t1", EntryRecord(f"p{i}", entry(i)))
    assert [r.path for r in store.list_staged("r1", "t1")] == ["p0", "p1", "p2", "p3"]
    assert [r.path for r in store.list_staged("r1", "t1", after="p0")] == ["p1", "p2", "p3"]


# --- schema -----------------------------------------------------------------------------------
def test_reopen_keeps_data_and_schema_creation_is_idempotent(open_store: OpenStore) -> None:
    first = open_store()
    new_repo(first, "r1")
    first.put_staged("r1", "t0", EntryRecord("a", entry(1)))
    first.close()
    second = open_store()
    assert second.get_repository("r1").id == "r1"
    assert second.get_staged("r1", "t0", "a") == EntryRecord("a", entry(1))
    new_repo(second, "r2")
    second.close()
    third = open_store()
    assert [r.id for r in third.list_repositories()] == ["r1", "r2"]


def test_concurrent_first_opens_create_the_schema_once(open_store: OpenStore) -> None:
    openers = 6
    stores = run_in_threads(openers, open_store)
    for i, s in enumerate(stores):
        new_repo(s, f"r{i}")
    assert len(stores[0].list_repositories()) == openers


# --- helpers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("prefix", "end"), [
    ("abc", "abd"),
    ("a\U0010ffff", "b"),
    ("\U0010ffff", None),
    ("a\ud7ff", "a\ue000"),
    ("", None),
])
def test_prefix_end(prefix: str, end: str | None) -> None:
    assert prefix_end(prefix) == end


def test_a_mirror_repository_is_created_with_its_marking(store: RefStore) -> None:
    """One transaction: another replica never finds the repository without its marking."""
    repo = Repository(id="m1", storage_namespace="local://m1", default_branch="main",
                      creation_date=1, read_only=True)
    marking = MirrorMarking("mirror-1", "east", "src")
    store.create_repository(repo, Branch("main", "", "t0"), marking)
    assert store.get_mirror_marking("m1") == marking
    with pytest.raises(RepositoryExistsError):
        store.create_repository(repo, Branch("main", "", "t1"),
                                MirrorMarking("mirror-2", "east", "src"))
    assert store.get_mirror_marking("m1") == marking  # the loser changed nothing


# --- a dump's refs -------------------------------------------------------------------
def _bare(store: RefStore, repo_id: str) -> None:
    repo = Repository(id=repo_id, storage_namespace=f"local://ns/{repo_id}",
                      default_branch="main", creation_date=1_700_000_000)
    store.create_repository(repo, Branch(name="main", commit_id="", staging_token="t0"))


def test_restore_refs_writes_everything_in_one_go(store: RefStore) -> None:
    _bare(store, "r1")
    records = [CommitRecord(f"c{n}", commit(str(n))) for n in range(3)]
    store.restore_refs("r1", records,
                       [(Branch("main", "c2", "new"), False), (Branch("dev", "c1", "t1"), True)],
                       [Tag("v1", "c0")])
    assert [c.id for c in store.list_commits("r1")] == ["c0", "c1", "c2"]
    main = store.get_branch("r1", "main")
    assert (main.commit_id, main.staging_token) == ("c2", "t0")  # its row, its token
    assert store.get_branch("r1", "dev").commit_id == "c1" and store.is_branch_hidden("r1", "dev")
    assert store.get_tag("r1", "v1").commit_id == "c0"
    assert not store.is_commit_present("r1", "c0")
    with pytest.raises(NonEmptyRepositoryError):  # not bare any more
        store.restore_refs("r1", [], [], [Tag("v2", "c1")])


def test_a_restore_refs_that_fails_midway_writes_nothing(store: RefStore) -> None:
    _bare(store, "r1")
    records = [CommitRecord(f"c{n}", commit(str(n))) for n in range(3)]
    with pytest.raises(TagExistsError):  # the last write fails: the first ones are undone
        store.restore_refs("r1", records, [(Branch("main", "c2", "x"), False),
                                           (Branch("dev", "c1", "t1"), True)],
                           [Tag("v1", "c0"), Tag("v1", "c1")], present=True)
    assert store.list_commits("r1") == [] and store.list_tags("r1") == []
    assert [(b.name, b.commit_id) for b in store.list_branches("r1")] == [("main", "")]
    assert not store.is_branch_hidden("r1", "dev") and not store.is_commit_present("r1", "c0")
    # and so it can be retried
    store.restore_refs("r1", records, [(Branch("main", "c2", "x"), False)], [],
                       present=True)
    assert store.get_branch("r1", "main").commit_id == "c2"
    assert store.is_commit_present("r1", "c0")


def test_restore_refs_of_more_records_than_one_dynamodb_transaction(store: RefStore) -> None:
    _bare(store, "r1")
    records = [CommitRecord(f"c{n:03d}", commit(str(n))) for n in range(130)]
    tags = [Tag(f"v{n:03d}", f"c{n:03d}") for n in range(40)]
    store.restore_refs("r1", records, [(Branch("main", "c129", "x"), False)], tags,
                       present=True)
    assert store.list_commits("r1") == records
    assert store.list_tags("r1") == tags
    assert store.is_commit_present("r1", "c129")
    assert store.get_branch("r1", "main").commit_id == "c129"


# --- imports and action runs -------------------------------------------------------
def test_imports(store: RefStore) -> None:
    new_repo(store, "r1")
    started = ImportState(id="i1", branch="main", updated_at=1.5)
    store.create_import("r1", started)
    with pytest.raises(RepositoryNotFoundError):
        store.create_import("nope", started)
    assert store.get_import("r1", "i1") == started
    with pytest.raises(ImportNotFoundError):
        store.get_import("r1", "i2")
    progressed = replace(started, ingested=10, updated_at=2.5)
    assert store.update_import("r1", progressed)
    assert store.get_import("r1", "i1") == progressed
    store.cancel_import("r1", "i1", "canceled by alice")
    canceled = store.get_import("r1", "i1")
    assert canceled.error == "canceled by alice" and canceled.ingested == 10
    assert not store.update_import("r1", progressed)  # no longer live: nothing written
    assert store.get_import("r1", "i1").error == "canceled by alice"
    with pytest.raises(ConflictError):
        store.cancel_import("r1", "i1", "again")
    committing = ImportState(id="i3", branch="main", updated_at=3.0, committing=True)
    store.create_import("r1", committing)
    with pytest.raises(ConflictError):
        store.cancel_import("r1", "i3", "too late")
    with pytest.raises(ImportNotFoundError):
        store.cancel_import("r1", "i9", "no such import")


def test_action_runs(store: RefStore) -> None:
    new_repo(store, "r1")

    def run(n: int, branch: str) -> ActionRun:
        return ActionRun(run_id=f"run{n}", event_type="pre-commit", branch=branch,
                         source_ref=branch, commit_id="", start_time=1.0 + n,
                         end_time=2.0 + n, status="completed")

    hooks = [HookRun(hook_run_id=f"h{i}", action="a", hook_id=f"hook{i}", start_time=1.0,
                     end_time=2.0, status="completed", output=f"output ü {i}")
             for i in range(3)]
    store.put_action_run("r1", run(0, "main"), hooks)
    store.put_action_run("r1", run(1, "dev"), [])
    with pytest.raises(RepositoryNotFoundError):
        store.put_action_run("nope", run(2, "main"), hooks)
    store.set_action_run_commit("r1", "run0", "c7")
    store.set_action_run_commit("r1", "run9", "c7")  # an unknown run: nothing happens
    assert store.get_action_run("r1", "run0") == replace(run(0, "main"), commit_id="c7")
    with pytest.raises(ActionRunNotFoundError):
        store.get_action_run("r1", "run9")
    assert [r.run_id for r in store.list_action_runs("r1")] == ["run0", "run1"]
    assert [r.run_id for r in store.list_action_runs("r1", branch="dev")] == ["run1"]
    assert [r.run_id for r in store.list_action_runs("r1", commit_id="c7")] == ["run0"]
    assert [r.run_id for r in store.list_action_runs("r1", after="run0", amount=1)] == [
        "run1"]
    listed = store.list_hook_runs("r1", "run0")
    assert [(h.hook_run_id, h.output) for h in listed] == [("h0", ""), ("h1", ""), ("h2", "")]
    assert [h.hook_run_id for h in store.list_hook_runs("r1", "run0", after="h0",
                                                        amount=1)] == ["h1"]
    assert store.get_hook_run("r1", "run0", "h2") == hooks[2]
    with pytest.raises(ActionRunNotFoundError):
        store.get_hook_run("r1", "run1", "h2")
