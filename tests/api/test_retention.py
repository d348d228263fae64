"""Garbage collection rules and prepare_commits through the lakefs SDK: set, get,
delete, validation, the commits CSV a run reads, mirrors and RBAC."""

from __future__ import annotations

import csv
import io
import itertools
import time
from collections.abc import Iterator

import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client
from lakefs_sdk import GarbageCollectionRule, GarbageCollectionRules

from lakefs_core.auth.builtin import FS_READ_ALL, FS_READ_WRITE_ALL, REPO_MANAGEMENT_READ_ALL
from lakefs_core.graveler.mirror import MirrorService
from lakefs_core.graveler.model import MirrorMarking
from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import sdk_client, user_client

_names = itertools.count()
_DAY = 86_400


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("retention-server"))) as s:
        yield s


@pytest.fixture(scope="module")
def admin(srv: LiveServer) -> Client:
    return sdk_client(srv)


@pytest.fixture
def repo(admin: Client) -> lakefs.Repository:
    name = f"gc-{next(_names)}"
    return lakefs.Repository(name, client=admin).create(storage_namespace=f"local://{name}")


def rules(default: int, **branches: int) -> GarbageCollectionRules:
    return GarbageCollectionRules(
        default_retention_days=default,
        branches=[GarbageCollectionRule(branch_id=b, retention_days=d)
                  for b, d in branches.items()])


def test_rules_are_set_read_and_deleted(admin: Client, repo: lakefs.Repository) -> None:
    api = admin.sdk_client.repositories_api
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        api.get_gc_rules(repo.id)
    api.set_gc_rules(repo.id, rules(7, main=28, dev=1))
    got = api.get_gc_rules(repo.id)
    assert got.default_retention_days == 7
    assert {(r.branch_id, r.retention_days) for r in got.branches} == {("main", 28), ("dev", 1)}
    # lakeFS's older internal routes (deprecated in the SDK) see the same rules
    with pytest.warns(DeprecationWarning):
        assert admin.sdk_client.internal_api.internal_get_garbage_collection_rules(
            repo.id) == got
    api.set_gc_rules(repo.id, rules(3))
    assert api.get_gc_rules(repo.id) == rules(3)
    api.delete_gc_rules(repo.id)
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        api.get_gc_rules(repo.id)
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        api.get_gc_rules("no-such-repo")


@pytest.mark.parametrize(("body", "message"), [
    ({"default_retention_days": -1, "branches": []}, "must not be negative"),
    ({"default_retention_days": 1, "branches": [{"branch_id": "dev", "retention_days": -5}]},
     "must not be negative"),
    ({"default_retention_days": 1, "branches": [{"branch_id": "bad branch",
                                                 "retention_days": 1}]}, "invalid"),
    ({"default_retention_days": 1, "branches": [{"branch_id": "dev", "retention_days": 1},
                                                {"branch_id": "dev", "retention_days": 2}]},
     "more than one"),
    ({"default_retention_days": 2**31, "branches": []}, "at most"),
    ({"default_retention_days": "7", "branches": []}, "default_retention_days"),
    ({"branches": []}, "default_retention_days"),
])
def test_bad_rules_are_refused_and_change_nothing(srv: LiveServer, admin: Client,
                                                  repo: lakefs.Repository,
                                                  body: dict[str, object],
                                                  message: str) -> None:
    admin.sdk_client.repositories_api.set_gc_rules(repo.id, rules(4, main=9))
    with srv.client() as http:
        resp = http.put(f"/repositories/{repo.id}/settings/gc_rules", json=body)
    assert resp.status_code == 400, resp.text
    assert message in resp.json()["message"]
    assert admin.sdk_client.repositories_api.get_gc_rules(repo.id) == rules(4, main=9)


def _commit(admin: Client, repo: str, branch: str, path: str, date: int) -> str:
    lakefs.Repository(repo, client=admin).branch(branch).object(path).upload(path.encode())
    return str(admin.sdk_client.commits_api.commit(
        repo, branch, lakefs_sdk.CommitCreation(message=f"add {path}", var_date=date)).id)


def _read_csv(srv: LiveServer, location: str) -> list[dict[str, str]]:
    data = srv.services.blockstores.for_storage_id("").get(location)
    return list(csv.DictReader(io.StringIO(data.decode())))


def test_prepare_commits_writes_the_commits_the_rules_keep(srv: LiveServer, admin: Client,
                                                           repo: lakefs.Repository) -> None:
    now = int(time.time())
    first = repo.branch("main").get_commit().id
    old = _commit(admin, repo.id, "main", "old", now - 30 * _DAY)
    replaced = _commit(admin, repo.id, "main", "replaced", now - 20 * _DAY)
    head = _commit(admin, repo.id, "main", "head", now - _DAY)
    repo.branch("dev").create(old)
    dev_head = _commit(admin, repo.id, "dev", "dev", now - 25 * _DAY)
    internal = admin.sdk_client.internal_api
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):  # no rules, no run
        internal.prepare_garbage_collection_commits(repo.id)

    admin.sdk_client.repositories_api.set_gc_rules(repo.id, rules(7, dev=1))
    run = internal.prepare_garbage_collection_commits(repo.id)
    assert run.gc_commits_location == (f"local://{repo.id}/_lakefs/retention/gc/commits/"
                                       f"run_id={run.run_id}/commits.csv")
    assert run.gc_addresses_location == f"local://{repo.id}/_lakefs/retention/gc/addresses/"
    rows = _read_csv(srv, run.gc_commits_location)
    assert list(rows[0]) == ["commit_id", "expired", "metarange_id"]
    expired = {r["commit_id"] for r in rows if r["expired"] == "true"}
    kept = {r["commit_id"] for r in rows if r["expired"] == "false"}
    # main keeps its head, what the head replaced, and the (new) first commit; dev only
    # its head: its parent was replaced longer ago than dev's one day
    assert kept == {head, replaced, first, dev_head}
    assert expired == {old}
    metaranges = {r["commit_id"]: r["metarange_id"] for r in rows}
    assert metaranges[head] == repo.commit(head).get_commit().meta_range_id

    admin.sdk_client.repositories_api.set_gc_rules(repo.id, rules(7, dev=30))
    second = internal.prepare_garbage_collection_commits(repo.id)
    assert second.run_id != run.run_id
    rows = _read_csv(srv, second.gc_commits_location)
    assert {r["commit_id"] for r in rows if r["expired"] == "true"} == set()
    assert len(rows) == 5


def test_garbage_collection_config(admin: Client) -> None:
    config = admin.sdk_client.internal_api.get_garbage_collection_config()
    assert config.grace_period == 6 * 3600


def test_a_read_only_repository_keeps_its_rules_unset(srv: LiveServer, admin: Client) -> None:
    name = f"gc-ro-{next(_names)}"
    admin.sdk_client.repositories_api.create_repository(lakefs_sdk.RepositoryCreation(
        name=name, storage_namespace=f"local://{name}", read_only=True))
    api = admin.sdk_client.repositories_api
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        api.set_gc_rules(name, rules(1))
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        api.delete_gc_rules(name)
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        admin.sdk_client.internal_api.prepare_garbage_collection_commits(name)
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        api.get_gc_rules(name)


def test_a_mirror_refuses_rules_until_detached(srv: LiveServer, admin: Client) -> None:
    name = f"gc-mirror-{next(_names)}"
    mirrors = MirrorService(srv.services.graveler)
    mirrors.create_repository(name, f"local://{name}", "main",
                              MirrorMarking("m-1", "east", "source"))
    api = admin.sdk_client.repositories_api
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        api.set_gc_rules(name, rules(1))
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        admin.sdk_client.internal_api.restore_refs(name, lakefs_sdk.RefsRestore(
            commits_meta_range_id="c", tags_meta_range_id="t", branches_meta_range_id="b"))
    mirrors.detach(name)  # an ordinary repository now: its owners set its rules
    api.set_gc_rules(name, rules(1))
    assert api.get_gc_rules(name) == rules(1)


def test_rules_need_retention_permissions(srv: LiveServer, admin: Client,
                                          repo: lakefs.Repository) -> None:
    admin.sdk_client.repositories_api.set_gc_rules(repo.id, rules(5))
    url = f"/repositories/{repo.id}/settings/gc_rules"
    body = {"default_retention_days": 1, "branches": []}
    with user_client(srv, FS_READ_WRITE_ALL) as writer:
        assert writer.get(url).status_code == 403
        assert writer.put(url, json=body).status_code == 403
        assert writer.delete(url).status_code == 403
        assert writer.post(f"/repositories/{repo.id}/gc/prepare_commits").status_code == 403
        assert writer.get(f"/repositories/{repo.id}/gc/rules/set_allowed").status_code == 403
    with user_client(srv, FS_READ_ALL, REPO_MANAGEMENT_READ_ALL) as reader:
        resp = reader.get(url)
        assert resp.status_code == 200
        assert resp.json() == {"default_retention_days": 5, "branches": []}
        assert reader.put(url, json=body).status_code == 403
    with srv.client() as http:
        assert http.get(f"/repositories/{repo.id}/gc/rules/set_allowed").status_code == 204
    assert admin.sdk_client.repositories_api.get_gc_rules(repo.id) == rules(5)
