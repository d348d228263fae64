"""Behaviour of the versioning engine, on every refstore x blockstore pair."""

from __future__ import annotations

import itertools
import threading

import pytest

from lakefs_core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CannotDeleteDefaultBranchError,
    CommitNotFoundError,
    DirtyBranchError,
    InvalidRefError,
    MergeConflictError,
    NoChangesError,
    ObjectExistsError,
    ObjectNotFoundError,
    ProtectedBranchError,
    ReadOnlyRepositoryError,
    RefNotFoundError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    ValidationError,
)
from lakefs_core.graveler.graveler import Graveler, RefType
from lakefs_core.graveler.model import DiffType, Entry
from tests.engine.conftest import Env

_n = itertools.count()


def entry(tag: str, size: int = 3) -> Entry:
    return Entry(address=f"data/{tag}", size=size, etag=f"etag-{tag}", mtime=1700000000.0,
                 metadata={"k": tag})


def put(g: Graveler, repo: str, branch: str, *paths: str, tag: str = "v1") -> None:
    for p in paths:
        g.set_entry(repo, branch, p, entry(f"{p}-{tag}"))


def paths(g: Graveler, repo: str, ref: str, prefix: str = "") -> list[str]:
    return [r.path for r in g.iterate_entries(repo, ref, prefix=prefix)]


def test_create_repository_has_initial_commit(env: Env) -> None:
    g, repo = env.graveler, env.repo
    branch = g.get_branch(repo, "main")
    commits, more = g.log(repo, "main")
    assert [c.commit.message for c in commits] == ["Repository created"]
    assert not more and commits[0].id == branch.commit_id
    assert paths(g, repo, "main") == []


def test_repository_errors_leave_no_state(env: Env) -> None:
    g = env.graveler
    before = [r.id for r in g.list_repositories()]
    with pytest.raises(RepositoryExistsError):
        g.create_repository(env.repo, env.namespace + "-other")
    with pytest.raises(RepositoryExistsError, match="already in use"):
        g.create_repository(env.repo + "-x", env.namespace)
    for bad in ("AB", "x", "Upper-case", "-leading", "a" * 64, "has_underscore"):
        with pytest.raises(ValidationError):
            g.create_repository(bad, env.namespace + "-bad")
    with pytest.raises(ValidationError):
        g.create_repository(env.repo + "-y", env.namespace + "-y", default_branch="bad..name")
    assert [r.id for r in g.list_repositories()] == before
    with pytest.raises(RepositoryNotFoundError):
        g.get_repository("no-such-repo")


def test_stage_commit_and_read_by_commit_id(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a.txt", "dir/b.txt")
    assert g.get_entry(repo, "main", "a.txt") == entry("a.txt-v1")
    with pytest.raises(ObjectNotFoundError):
        g.get_entry(repo, "main@", "a.txt")  # committed state only
    c1 = g.commit(repo, "main", "first", "alice", metadata={"x": "1"})
    assert c1.commit.parents == (g.log(repo, "main~1")[0][0].id,)
    assert g.get_entry(repo, c1.id, "dir/b.txt") == entry("dir/b.txt-v1")
    assert g.diff_uncommitted(repo, "main")[0] == []
    with pytest.raises(NoChangesError):
        g.commit(repo, "main", "nothing", "alice")
    empty = g.commit(repo, "main", "empty", "alice", allow_empty=True)
    assert empty.commit.metarange_id == c1.commit.metarange_id
    put(g, repo, "main", "a.txt", tag="v2")
    g.commit(repo, "main", "second", "alice")
    assert g.get_entry(repo, c1.id, "a.txt") == entry("a.txt-v1")
    assert g.get_entry(repo, "main", "a.txt") == entry("a.txt-v2")


def test_if_absent_and_delete(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a")
    with pytest.raises(ObjectExistsError):
        g.set_entry(repo, "main", "a", entry("other"), if_absent=True)
    g.commit(repo, "main", "c", "u")
    with pytest.raises(ObjectExistsError):
        g.set_entry(repo, "main", "a", entry("other"), if_absent=True)
    g.delete_entry(repo, "main", "a")
    with pytest.raises(ObjectNotFoundError):
        g.get_entry(repo, "main", "a")
    with pytest.raises(ObjectNotFoundError):
        g.delete_entry(repo, "main", "a")
    assert [d.type for d in g.diff_uncommitted(repo, "main")[0]] == [DiffType.REMOVED]
    g.commit(repo, "main", "rm", "u")
    assert paths(g, repo, "main") == []


def test_listing_with_delimiter_and_pages(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a/1", "a/2", "b/x/1", "c", "d/1")
    g.commit(repo, "main", "c", "u")
    put(g, repo, "main", "a/3", "e")
    g.delete_entry(repo, "main", "d/1")
    items, more = g.list_entries(repo, "main", delimiter="/")
    assert [(i.path, i.entry is None) for i in items] == [
        ("a/", True), ("b/", True), ("c", False), ("e", False)]
    assert not more
    page1, more1 = g.list_entries(repo, "main", amount=2)
    page2, more2 = g.list_entries(repo, "main", after=page1[-1].path, amount=10)
    assert more1 and not more2
    assert [i.path for i in page1 + page2] == ["a/1", "a/2", "a/3", "b/x/1", "c", "e"]
    items, _ = g.list_entries(repo, "main", prefix="a/", delimiter="/")
    assert [i.path for i in items] == ["a/1", "a/2", "a/3"]
    items, _ = g.list_entries(repo, "main", delimiter="/", after="a/")
    assert [i.path for i in items] == ["b/", "c", "e"]


def test_ref_expressions_and_tags(env: Env) -> None:
    g, repo = env.graveler, env.repo
    ids = []
    for i in range(3):
        put(g, repo, "main", f"f{i}")
        ids.append(g.commit(repo, "main", f"c{i}", "u").id)
    assert g.resolve_ref(repo, "main").type is RefType.BRANCH
    assert g.resolve_ref(repo, "main~1").commit_id == ids[1]
    assert g.resolve_ref(repo, "main~2").commit_id == ids[0]
    assert g.resolve_ref(repo, "main^").commit_id == ids[1]
    assert g.resolve_ref(repo, "main^1~1").commit_id == ids[0]
    assert g.resolve_ref(repo, ids[2][:10]).commit_id == ids[2]
    assert g.resolve_ref(repo, "main@").type is RefType.COMMIT
    tag = g.create_tag(repo, "v1.0", "main~1")
    assert tag.commit_id == ids[1]
    assert g.resolve_ref(repo, "v1.0").type is RefType.TAG
    assert g.resolve_ref(repo, "v1.0~1").commit_id == ids[0]
    with pytest.raises(TagExistsError):
        g.create_tag(repo, "v1.0", "main")
    assert [t.name for t in g.list_tags(repo)] == ["v1.0"]
    g.delete_tag(repo, "v1.0")
    with pytest.raises(RefNotFoundError):
        g.resolve_ref(repo, "v1.0")
    with pytest.raises(RefNotFoundError):
        g.resolve_ref(repo, "main~10")
    for bad in ("", "main~x", "main@@", "ma in", "v1@~1x"):
        with pytest.raises(InvalidRefError):
            g.resolve_ref(repo, bad)
    with pytest.raises(CommitNotFoundError):
        g.resolve_ref(repo, "0" * 64)
    with pytest.raises(ValidationError):
        g.create_tag(repo, "bad..tag", "main")


def test_branches(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a")
    g.commit(repo, "main", "c", "u")
    b = g.create_branch(repo, "feature-1", "main")
    assert b.commit_id == g.get_branch(repo, "main").commit_id
    with pytest.raises(BranchExistsError):
        g.create_branch(repo, "feature-1", "main")
    with pytest.raises(ValidationError):
        g.create_branch(repo, "bad/name", "main")
    with pytest.raises(RefNotFoundError):
        g.create_branch(repo, "x", "no-such-ref")
    put(g, repo, "feature-1", "b")
    assert paths(g, repo, "main") == ["a"]
    assert paths(g, repo, "feature-1") == ["a", "b"]
    assert [br.name for br in g.list_branches(repo)] == ["feature-1", "main"]
    with pytest.raises(CannotDeleteDefaultBranchError):
        g.delete_branch(repo, "main")
    g.delete_branch(repo, "feature-1")
    with pytest.raises(BranchNotFoundError):
        g.get_branch(repo, "feature-1")


def test_diff_two_and_three_dot(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "keep", "change", "remove")
    g.commit(repo, "main", "base", "u")
    g.create_branch(repo, "dev", "main")
    put(g, repo, "dev", "change", tag="v2")
    put(g, repo, "dev", "add")
    g.delete_entry(repo, "dev", "remove")
    g.commit(repo, "dev", "dev work", "u")
    put(g, repo, "main", "main-only")
    g.commit(repo, "main", "main work", "u")
    two, _ = g.diff(repo, "main", "dev")
    assert {(d.path, d.type) for d in two} == {
        ("add", DiffType.ADDED), ("change", DiffType.CHANGED), ("remove", DiffType.REMOVED),
        ("main-only", DiffType.REMOVED)}
    three, _ = g.diff(repo, "main", "dev", three_dot=True)
    assert {(d.path, d.type) for d in three} == {
        ("add", DiffType.ADDED), ("change", DiffType.CHANGED), ("remove", DiffType.REMOVED)}
    page, more = g.diff(repo, "main", "dev", amount=2)
    assert len(page) == 2 and more


def test_merge(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "shared", "x")
    g.commit(repo, "main", "base", "u")
    g.create_branch(repo, "dev", "main")
    put(g, repo, "dev", "from-dev")
    g.commit(repo, "dev", "dev", "u")
    put(g, repo, "main", "from-main")
    g.commit(repo, "main", "main", "u")
    merged = g.merge(repo, "dev", "main", "merger")
    assert len(merged.commit.parents) == 2
    assert paths(g, repo, "main") == ["from-dev", "from-main", "shared", "x"]
    with pytest.raises(NoChangesError):
        g.merge(repo, "dev", "main", "merger")
    # conflict: both sides change "x" differently
    put(g, repo, "dev", "x", tag="dev")
    g.commit(repo, "dev", "dev x", "u")
    put(g, repo, "main", "x", tag="main")
    g.commit(repo, "main", "main x", "u")
    head = g.get_branch(repo, "main").commit_id
    with pytest.raises(MergeConflictError) as exc:
        g.merge(repo, "dev", "main", "merger")
    assert exc.value.paths == ["x"]
    assert g.get_branch(repo, "main").commit_id == head
    g.merge(repo, "dev", "main", "merger", strategy="source-wins")
    assert g.get_entry(repo, "main", "x") == entry("x-dev")
    # dirty destination
    put(g, repo, "dev", "y")
    g.commit(repo, "dev", "y", "u")
    put(g, repo, "main", "uncommitted")
    with pytest.raises(DirtyBranchError):
        g.merge(repo, "dev", "main", "merger")
    with pytest.raises(ValidationError):
        g.merge(repo, "dev", "main", "merger", strategy="ours")


def test_revert_and_cherry_pick(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a")
    g.commit(repo, "main", "a", "u")
    put(g, repo, "main", "b")
    cb = g.commit(repo, "main", "b", "u")
    put(g, repo, "main", "c")
    g.commit(repo, "main", "c", "u")
    rev = g.revert(repo, "main", cb.id, "u")
    assert rev.commit.message == f"Revert {cb.id}"
    assert paths(g, repo, "main") == ["a", "c"]
    g.create_branch(repo, "other", "main~3")
    picked = g.cherry_pick(repo, "other", cb.id, "u")
    assert picked.commit.message == "b"
    assert picked.commit.metadata == {"cherry-pick-origin": cb.id, "cherry-pick-committer": "u"}
    assert paths(g, repo, "other") == ["a", "b"]
    assert g.revert(repo, "other", "other", "u").commit.message == "Revert other"
    assert paths(g, repo, "other") == ["a"]
    put(g, repo, "other", "dirty")
    with pytest.raises(DirtyBranchError):
        g.revert(repo, "other", cb.id, "u")


def test_resets(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a")
    first = g.commit(repo, "main", "a", "u")
    put(g, repo, "main", "p/1", "p/2", "q")
    g.reset_object(repo, "main", "q")
    assert paths(g, repo, "main") == ["a", "p/1", "p/2"]
    g.reset_prefix(repo, "main", "p/")
    assert paths(g, repo, "main") == ["a"]
    put(g, repo, "main", "z")
    g.reset_branch(repo, "main")
    assert g.diff_uncommitted(repo, "main")[0] == []
    put(g, repo, "main", "b")
    g.commit(repo, "main", "b", "u")
    g.hard_reset(repo, "main", first.id)
    assert g.get_branch(repo, "main").commit_id == first.id
    assert paths(g, repo, "main") == ["a"]


def test_read_only_and_protected(env: Env) -> None:
    g, repo = env.graveler, env.repo
    put(g, repo, "main", "a")
    g.commit(repo, "main", "a", "u")
    g.create_branch(repo, "dev", "main")
    g.set_branch_protection_rules(repo, ["main"])
    with pytest.raises(ProtectedBranchError):
        put(g, repo, "main", "b")
    with pytest.raises(ProtectedBranchError):
        g.commit(repo, "main", "x", "u", allow_empty=True)
    put(g, repo, "dev", "b")
    g.commit(repo, "dev", "b", "u")
    g.merge(repo, "dev", "main", "u")  # merges are allowed
    assert paths(g, repo, "main") == ["a", "b"]
    g.set_read_only(repo, True)
    head = g.get_branch(repo, "dev").commit_id
    for op in (lambda: put(g, repo, "dev", "c"),
               lambda: g.commit(repo, "dev", "x", "u", allow_empty=True),
               lambda: g.create_branch(repo, "new", "main"),
               lambda: g.create_tag(repo, "t", "main"),
               lambda: g.merge(repo, "main", "dev", "u"),
               lambda: g.delete_branch(repo, "dev")):
        with pytest.raises(ReadOnlyRepositoryError):
            op()
    assert g.get_branch(repo, "dev").commit_id == head
    assert paths(g, repo, "dev") == ["a", "b"]  # reads still work


def test_log_first_parent_and_pages(env: Env) -> None:
    g, repo = env.graveler, env.repo
    g.create_branch(repo, "dev", "main")
    for i in range(3):
        put(g, repo, "dev", f"d{i}")
        g.commit(repo, "dev", f"dev {i}", "u")
    put(g, repo, "main", "m")
    g.commit(repo, "main", "main 0", "u")
    g.merge(repo, "dev", "main", "u", message="merge dev")
    full, _ = g.log(repo, "main", amount=100)
    assert len(full) == 1 + 3 + 1 + 1
    fp, _ = g.log(repo, "main", first_parent=True)
    assert [c.commit.message for c in fp] == ["merge dev", "main 0", "Repository created"]
    page1, more = g.log(repo, "main", amount=2)
    page2, _ = g.log(repo, "main", amount=100, after=page1[-1].id)
    assert more and [c.id for c in page1 + page2] == [c.id for c in full]
    touched, _ = g.log(repo, "main", objects=["d1"])
    # compared with its first parent, the merge commit changed d1 too
    assert [c.commit.message for c in touched] == ["merge dev", "dev 1"]


def test_concurrent_commits_lose_nothing(env: Env) -> None:
    g, repo = env.graveler, env.repo
    threads, per_thread = 6, 4
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(per_thread):
                p = f"t{t}/{i}"
                g.set_entry(repo, "main", p, entry(p))
                try:
                    g.commit(repo, "main", f"{t}-{i}", "u")
                except NoChangesError:
                    pass  # another thread's commit already took our change: not lost
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    assert g.diff_uncommitted(repo, "main")[0] == []
    expected = sorted(f"t{t}/{i}" for t in range(threads) for i in range(per_thread))
    assert paths(g, repo, "main") == expected
    log, _ = g.log(repo, "main", amount=1000)
    # a linear history: each commit's parent is the next one in the log
    for child, parent in itertools.pairwise(log):
        assert child.commit.parents == (parent.id,)


def test_commit_ids_are_deterministic(env: Env) -> None:
    g = Graveler(env.graveler.refstore, env.graveler.store_for, clock=lambda: 1234567890.0)
    ids = []
    for n in range(2):
        repo = f"{env.repo}-det{n}"
        g.create_repository(repo, f"{env.namespace}-det{n}")
        put(g, repo, "main", "a", "b")
        ids.append(g.commit(repo, "main", "same", "u").id)
    assert ids[0] == ids[1]
