"""Garbage collection rules and a run's preparation through the lakefs SDK: set, get,
delete, validation, the commits CSV a run reads (now or in the background), the
uncommitted objects, mirrors and RBAC."""

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
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        admin.sdk_client.internal_api.prepare_garbage_collection_commits_async(name)
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException, match="read-only"):
        admin.sdk_client.internal_api.prepare_garbage_collection_uncommitted(name)
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


def _wait_for_task(admin: Client, repo: str, task_id: str
                   ) -> lakefs_sdk.PrepareGarbageCollectionCommitsStatus:
    internal = admin.sdk_client.internal_api
    deadline = time.monotonic() + 60
    status = internal.prepare_garbage_collection_commits_status(repo, task_id)
    while not status.completed and time.monotonic() < deadline:
        time.sleep(0.05)
        status = internal.prepare_garbage_collection_commits_status(repo, task_id)
    return status


def test_prepare_commits_runs_in_the_background(srv: LiveServer, admin: Client,
                                                repo: lakefs.Repository) -> None:
    internal = admin.sdk_client.internal_api
    head = _commit(admin, repo.id, "main", "a", int(time.time()))
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):  # no rules, no run
        internal.prepare_garbage_collection_commits_async(repo.id)
    admin.sdk_client.repositories_api.set_gc_rules(repo.id, rules(7))
    task = internal.prepare_garbage_collection_commits_async(repo.id)
    status = _wait_for_task(admin, repo.id, task.id)
    assert status.completed and status.error is None, status
    assert status.task_id == task.id
    assert status.result is not None and status.result.run_id == task.id
    assert status.result.gc_commits_location == (
        f"local://{repo.id}/_lakefs/retention/gc/commits/run_id={task.id}/commits.csv")
    assert status.result.gc_addresses_location == (
        f"local://{repo.id}/_lakefs/retention/gc/addresses/")
    rows = _read_csv(srv, status.result.gc_commits_location)
    assert head in {r["commit_id"] for r in rows if r["expired"] == "false"}
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        internal.prepare_garbage_collection_commits_status(repo.id, "no-such-task")
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        internal.prepare_garbage_collection_commits_status("no-such-repo", task.id)
    with srv.client() as http:  # the id is required
        resp = http.get(f"/repositories/{repo.id}/gc/prepare_commits/status")
        assert resp.status_code == 400, resp.text


def test_prepare_uncommitted_writes_every_staged_object(srv: LiveServer, admin: Client,
                                                        repo: lakefs.Repository) -> None:
    import pyarrow.parquet as pq

    main = repo.branch("main")
    main.object("committed").upload(b"c")
    main.commit(message="one")
    dev = repo.branch("dev").create("main")
    main.object("staged-1").upload(b"1")
    main.object("committed").delete()  # a staged delete writes no object
    dev.object("staged-2").upload(b"2")
    namespace = f"local://{repo.id}/"
    expected = {o.physical_address.removeprefix(namespace)
                for o in (main.object("staged-1").stat(), dev.object("staged-2").stat())}

    internal = admin.sdk_client.internal_api
    got = internal.prepare_garbage_collection_uncommitted(
        repo.id, lakefs_sdk.PrepareGCUncommittedRequest())
    assert got.continuation_token is None
    assert got.gc_uncommitted_location == (
        f"{namespace}_lakefs/retention/gc/uncommitted/{got.run_id}/uncommitted/")
    store = srv.services.blockstores.for_storage_id("")
    files = [s.address for s in store.list(got.gc_uncommitted_location)]
    assert len(files) == 1 and files[0].endswith(".parquet")
    table = pq.read_table(io.BytesIO(store.get(files[0])))
    assert table.column_names == ["physical_address", "creation_date"]
    assert set(table.column("physical_address").to_pylist()) == expected
    assert all(abs(t - time.time()) < 3600 for t in table.column("creation_date").to_pylist())

    with pytest.raises(lakefs_sdk.exceptions.BadRequestException, match="continuation_token"):
        internal.prepare_garbage_collection_uncommitted(
            repo.id, lakefs_sdk.PrepareGCUncommittedRequest(continuation_token="bogus"))
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        internal.prepare_garbage_collection_uncommitted("no-such-repo")


def test_background_and_uncommitted_preparation_need_retention_permissions(
        srv: LiveServer, admin: Client, repo: lakefs.Repository) -> None:
    admin.sdk_client.repositories_api.set_gc_rules(repo.id, rules(5))
    task = admin.sdk_client.internal_api.prepare_garbage_collection_commits_async(repo.id)
    gc = f"/repositories/{repo.id}/gc"
    with user_client(srv, FS_READ_WRITE_ALL) as writer:
        assert writer.post(f"{gc}/prepare_commits/async").status_code == 403
        assert writer.get(f"{gc}/prepare_commits/status",
                          params={"id": task.id}).status_code == 403
        assert writer.post(f"{gc}/prepare_uncommited", json={}).status_code == 403
    assert _wait_for_task(admin, repo.id, task.id).completed
