"""The engine's mirroring interface: the rules replication cannot get around."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lakefs_core.actions import ActionsService
from lakefs_core.errors import (
    BranchChangedError,
    CommitNotFoundError,
    ReadOnlyRepositoryError,
    RepositoryExistsError,
    ValidationError,
)
from lakefs_core.events import EventType
from lakefs_core.graveler.encoding import commit_id
from lakefs_core.graveler.hooks import NoHooks
from lakefs_core.graveler.mirror import BranchMove, MirrorService
from lakefs_core.graveler.model import Commit, CommitRecord, Entry, MirrorMarking
from lakefs_testing.webhook import WebhookServer
from tests.api.test_actions import _action
from tests.engine.conftest import Env

MARK = MirrorMarking("m1", "east", "src")


def source_commits(env: Env, n: int) -> list[CommitRecord]:
    """``n`` commits made on the source repository, oldest first (with the first one)."""
    g = env.graveler
    for i in range(n):
        g.set_entry(env.repo, "main", f"f{i}", Entry(f"data/{i}", 1, f"e{i}", 1.0))
        g.commit(env.repo, "main", f"c{i}", "alice")
    records, _ = g.log(env.repo, "main", amount=n + 1)
    return list(reversed(records))


@pytest.fixture
def mirrors(env: Env) -> MirrorService:
    service = MirrorService(env.graveler)
    service.create_repository("mirror", env.namespace + "-mirror", "main", MARK)
    return service


def replicate_ranges(env: Env) -> None:
    """Copy the source's range files into the mirror's namespace (what replication awaits)."""
    store = env.graveler.store_for("")
    source = env.namespace.rstrip("/") + "/"
    for obj in store.list(source + "_lakefs/"):
        store.copy(obj.address, env.namespace + "-mirror/" + obj.address[len(source):])


def test_a_mirror_is_read_only_and_marked(env: Env, mirrors: MirrorService) -> None:
    assert mirrors.marking("mirror") == MARK
    assert mirrors.marking(env.repo) is None and mirrors.marking("nope") is None
    # idempotent for the same mirror, refused for another
    mirrors.create_repository("mirror", env.namespace + "-mirror", "main", MARK)
    with pytest.raises(RepositoryExistsError):
        mirrors.create_repository("mirror", env.namespace + "-mirror", "main",
                                  replace(MARK, mirror_id="m2"))
    with pytest.raises(ReadOnlyRepositoryError):
        env.graveler.create_branch("mirror", "dev", "main")


def test_only_present_commits_move_refs_and_are_served(env: Env,
                                                        mirrors: MirrorService) -> None:
    records = source_commits(env, 2)
    head = records[-1].id
    replicate_ranges(env)
    assert mirrors.write_commits("mirror", records) == 3
    with pytest.raises(CommitNotFoundError):
        mirrors.promote_branch("mirror", "main", None, head)
    with pytest.raises(CommitNotFoundError):
        mirrors.set_tag("mirror", "v1", head)
    with pytest.raises(CommitNotFoundError):
        mirrors.mark_present("mirror", "0" * 64)  # no such record
    mirrors.mark_present("mirror", head)
    mirrors.promote_branch("mirror", "main", None, head)
    mirrors.set_tag("mirror", "v1", head)
    assert mirrors.branches("mirror") == {"main": head}
    assert mirrors.tags("mirror") == {"v1": head}
    assert env.graveler.get_entry("mirror", "main", "f1").etag == "e1"
    # the skipped intermediate commit is known but never served
    with pytest.raises(CommitNotFoundError):
        env.graveler.get_entry("mirror", records[1].id, "f0")
    # compare-and-swap: a stale expectation loses
    with pytest.raises(BranchChangedError):
        mirrors.promote_branch("mirror", "main", records[1].id, head)


def test_a_mirror_made_again_serves_nothing_proven_for_the_one_before(
        env: Env, mirrors: MirrorService) -> None:
    records = source_commits(env, 1)
    head = records[-1].id
    replicate_ranges(env)
    mirrors.write_commits("mirror", records)
    mirrors.mark_present("mirror", head)
    assert env.graveler.get_entry("mirror", head, "f0").etag == "e0"  # remembered now
    assert mirrors.delete_repository("mirror", "m1") is True
    later = env.graveler.clock() + 10
    env.graveler.clock = lambda: later
    mirrors.create_repository("mirror", env.namespace + "-mirror", "main", MARK)
    mirrors.write_commits("mirror", records)
    with pytest.raises(CommitNotFoundError):
        env.graveler.get_entry("mirror", head, "f0")


def test_a_group_of_mirror_branches_moves_together_or_not_at_all(
        env: Env, mirrors: MirrorService) -> None:
    """A mirror group's cut: branches of two mirror repositories in one transaction."""
    records = source_commits(env, 2)
    c1, c2 = records[1].id, records[2].id
    mirrors.create_repository("mirror2", env.namespace + "-mirror2", "main",
                              replace(MARK, mirror_id="m2"))
    for repo in ("mirror", "mirror2"):
        mirrors.write_commits(repo, records)
    mirrors.mark_present("mirror", c1)
    mirrors.mark_present("mirror2", c1)
    # a commit not proven present in one member: nothing moves
    with pytest.raises(CommitNotFoundError):
        mirrors.promote_branches([BranchMove("mirror", "main", None, c1),
                                  BranchMove("mirror2", "main", None, c2)])
    assert mirrors.branches("mirror") == {"main": ""} and mirrors.branch_head("mirror2",
                                                                               "main") is None
    mirrors.promote_branches([BranchMove("mirror", "main", None, c1),
                              BranchMove("mirror2", "main", None, c1),
                              BranchMove("mirror2", "dev", None, c1)])
    assert mirrors.branches("mirror") == {"main": c1}
    assert mirrors.branches("mirror2") == {"main": c1, "dev": c1}
    # another promotion moved one member meanwhile: the compare-and-swap moves none
    mirrors.mark_present("mirror", c2)
    mirrors.mark_present("mirror2", c2)
    mirrors.promote_branch("mirror2", "dev", c1, c2)
    with pytest.raises(BranchChangedError):
        mirrors.promote_branches([BranchMove("mirror", "main", c1, c2),
                                  BranchMove("mirror2", "dev", c1, c2)])
    assert mirrors.branch_head("mirror", "main") == c1
    mirrors.promote_branches([BranchMove("mirror", "main", c1, c2),
                              BranchMove("mirror2", "main", c1, c2)])
    assert mirrors.heads_at_once([("mirror", "main"), ("mirror2", "main"),
                                  ("mirror2", "gone")]) == {("mirror", "main"): c2,
                                                            ("mirror2", "main"): c2}
    # a detached member: nothing moves
    mirrors.mark_detached("mirror2", "m2")
    with pytest.raises(ValidationError, match="was detached"):
        mirrors.promote_branches([BranchMove("mirror", "main", c2, c1),
                                  BranchMove("mirror2", "main", c2, c1)])
    assert mirrors.branch_head("mirror", "main") == c2


def test_commit_records_must_match_their_ids(env: Env, mirrors: MirrorService) -> None:
    forged = Commit(parents=(), metarange_id="0" * 64, message="m", committer="c",
                    creation_date=1, metadata={}, generation=1)
    with pytest.raises(ValidationError, match="does not match"):
        mirrors.write_commits("mirror", [CommitRecord("1" * 64, forged)])
    assert not mirrors.has_commit("mirror", "1" * 64)
    mirrors.write_commits("mirror", [CommitRecord(commit_id(forged), forged)])
    assert mirrors.has_commit("mirror", commit_id(forged))


def test_detach_and_delete(env: Env, mirrors: MirrorService) -> None:
    with pytest.raises(Exception, match="not mirror"):
        mirrors.mark_detached("mirror", "other")
    mirrors.mark_detached("mirror", "m1")
    assert mirrors.detach("mirror").read_only is False
    assert mirrors.marking("mirror") == replace(MARK, detached=True)
    assert mirrors.delete_repository("mirror", "m1") is False  # detached: the users' now
    # a replication round that was under way moves none of its refs any more
    for move in (lambda: mirrors.promote_branch("mirror", "main", None, "c" * 64),
                 lambda: mirrors.set_tag("mirror", "v1", "c" * 64),
                 lambda: mirrors.delete_branch("mirror", "dev"),
                 lambda: mirrors.delete_tag("mirror", "v1")):
        with pytest.raises(ValidationError, match="was detached"):
            move()
    mirrors.create_repository("other", env.namespace + "-other", "main",
                              replace(MARK, mirror_id="m2"))
    assert mirrors.delete_repository("other", "m1") is False  # not this mirror's
    assert mirrors.delete_repository("other", "m2") is True
    assert mirrors.marking("other") is None


def test_promotion_on_a_mirror_runs_no_hooks(env: Env, mirrors: MirrorService) -> None:
    webhook = WebhookServer()
    actions = ActionsService(env.graveler)
    env.graveler.hooks = actions
    try:
        g, store = env.graveler, env.graveler.store_for("")
        data = _action("on-commit", "post-commit", webhook.url, branches="['*']").encode()
        store.put(env.namespace.rstrip("/") + "/data/action", data)
        g.set_entry(env.repo, "main", "_lakefs_actions/a.yaml",
                    Entry("data/action", len(data), "ea", 1.0))
        records = source_commits(env, 1)
        assert len(webhook.calls) == 1  # the source ran its hook
        replicate_ranges(env)
        mirrors.write_commits("mirror", records)
        mirrors.mark_present("mirror", records[-1].id)
        mirrors.promote_branch("mirror", "main", None, records[-1].id)
        assert g.get_entry("mirror", "main", "_lakefs_actions/a.yaml").etag == "ea"
        assert len(webhook.calls) == 1  # promotion ran none
        assert g.refstore.list_action_runs("mirror") == []
        assert len(g.refstore.list_action_runs(env.repo)) == 1
    finally:
        actions.close()
        webhook.close()


def test_a_detached_mirror_merges_past_a_base_whose_data_never_arrived(
        env: Env, mirrors: MirrorService) -> None:
    """Replication proves only the commits branches move to: in a detached former mirror
    the merge base of two branches may be a commit whose metarange never arrived. Merge
    and three-dot diff then use the nearest proven ancestor; revert and cherry-pick that
    need the unproven commit's data say so."""
    g = env.graveler
    g.set_entry(env.repo, "main", "shared", Entry("data/s", 1, "s0", 1.0))
    c0 = g.commit(env.repo, "main", "c0", "alice")
    g.set_entry(env.repo, "main", "early", Entry("data/e", 1, "e1", 1.0))
    c1 = g.commit(env.repo, "main", "c1", "alice")
    g.create_branch(env.repo, "b2", "main")
    g.set_entry(env.repo, "main", "late", Entry("data/l", 1, "l2", 1.0))
    c2 = g.commit(env.repo, "main", "c2", "alice")
    g.set_entry(env.repo, "b2", "side", Entry("data/x", 1, "x3", 1.0))
    c3 = g.commit(env.repo, "b2", "c3", "alice")
    records, _ = g.log(env.repo, "main", amount=10)
    side, _ = g.log(env.repo, "b2", amount=10)
    replicate_ranges(env)
    mirrors.write_commits("mirror", list(reversed(records)) + [side[0]])
    for rec in (c0, c2, c3):
        mirrors.mark_present("mirror", rec.id)
    mirrors.promote_branch("mirror", "main", None, c2.id)
    mirrors.promote_branch("mirror", "b2", None, c3.id)
    # c1's metarange never landed in the mirror's namespace
    store = g.store_for("")
    store.delete(env.namespace + "-mirror/_lakefs/" + c1.commit.metarange_id)
    mirrors.mark_detached("mirror", "m1")
    mirrors.detach("mirror")

    assert g.find_merge_base("mirror", c2.id, c3.id) == c1.id
    diff, _ = g.diff("mirror", "b2", "main", three_dot=True)
    # from c0 (the nearest proven base): main added early and late
    assert sorted(d.path for d in diff) == ["early", "late"]
    merged = g.merge("mirror", "main", "b2", "bob")
    assert merged.commit.parents == (c3.id, c2.id)
    listed = g.list_entries("mirror", "b2")[0]
    assert {i.path: i.entry and i.entry.etag for i in listed} == {
        "early": "e1", "late": "l2", "shared": "s0", "side": "x3"}
    with pytest.raises(CommitNotFoundError, match="never proved its data present"):
        g.revert("mirror", "main", c2.id, "bob")  # its parent is c1
    with pytest.raises(CommitNotFoundError, match="never proved its data present"):
        g.cherry_pick("mirror", "b2", c1.id, "bob")
    with pytest.raises(CommitNotFoundError, match="never proved its data present"):
        g.merge("mirror", c1.id, "main", "bob")


class _FreezeOnPreCommit:
    """Hooks that freeze the repository (as a switchover does) while a commit or merge
    that passed its first read-only check runs its pre-hooks."""

    def __init__(self, env: Env, mirrors: MirrorService) -> None:
        self.env, self.mirrors = env, mirrors

    def pre(self, record: Any) -> str:
        if record.event_type in (EventType.PRE_COMMIT, EventType.PRE_MERGE):
            self.mirrors.set_read_only(self.env.repo, True)
        return ""

    def post(self, record: Any, pre_run_id: str = "") -> None:
        return None


def test_a_write_that_passed_its_check_before_a_freeze_does_not_land_after_it(
        env: Env, mirrors: MirrorService) -> None:
    g = env.graveler
    g.set_entry(env.repo, "main", "a", Entry("data/a", 1, "a1", 1.0))
    g.commit(env.repo, "main", "first", "alice")
    g.create_branch(env.repo, "dev", "main")
    g.set_entry(env.repo, "dev", "b", Entry("data/b", 1, "b1", 1.0))
    g.commit(env.repo, "dev", "on dev", "alice")
    g.set_entry(env.repo, "main", "c", Entry("data/c", 1, "c1", 1.0))
    heads = {b: g.get_branch(env.repo, b).commit_id for b in ("main", "dev")}
    g.hooks = _FreezeOnPreCommit(env, mirrors)
    with pytest.raises(ReadOnlyRepositoryError):
        g.commit(env.repo, "main", "late", "alice")
    mirrors.set_read_only(env.repo, False)
    with pytest.raises(ReadOnlyRepositoryError):
        g.merge(env.repo, "dev", "main", "alice", allow_empty=True)
    assert {b: g.get_branch(env.repo, b).commit_id for b in ("main", "dev")} == heads
    # the staged change is still there to commit once the repository is writable again
    mirrors.set_read_only(env.repo, False)
    g.hooks = NoHooks()
    assert g.commit(env.repo, "main", "now", "alice").commit.parents == (heads["main"],)


def test_an_adopted_repository_detached_again_serves_only_what_was_proven(
        env: Env, mirrors: MirrorService) -> None:
    """A process that read an ordinary repository before a switchover adopted it as a
    mirror must not serve, once it is detached again, a commit it only learned of."""
    g = env.graveler
    g.set_entry(env.repo, "main", "f0", Entry("data/0", 1, "e0", 1.0))
    own = g.commit(env.repo, "main", "own", "alice")
    assert g.get_entry(env.repo, own.id, "f0").etag == "e0"  # read as an ordinary one
    learned = Commit(parents=(own.id,), metarange_id="ab" * 32, message="from west",
                     committer="bob", creation_date=own.commit.creation_date + 1,
                     generation=own.commit.generation + 1)
    mirrors.set_read_only(env.repo, True)  # the switchover's freeze, then adoption
    adopted = replace(MARK, mirror_id="back", source_repository=env.repo)
    mirrors.adopt_repository(env.repo, adopted)
    mirrors.write_commits(env.repo, [CommitRecord(commit_id(learned), learned)])
    mirrors.mark_detached(env.repo, "back")  # a failover: detached before it was proven
    mirrors.detach(env.repo)
    with pytest.raises(CommitNotFoundError, match="never proved its data present"):
        g.get_entry(env.repo, commit_id(learned), "f0")
    assert g.get_entry(env.repo, own.id, "f0").etag == "e0"  # its own commits stay
