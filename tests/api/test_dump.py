"""Refs dump and restore through the lakefs SDK, on local storage and on S3 (moto):
a dump restored into a bare repository over the same namespace gives back the same
commit ids, log, branches, tags and objects; a restore into a repository with refs,
or of a dump that does not hash, is refused; and RBAC as lakeFS."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client

from lakefs_core.auth.builtin import FS_READ_ALL
from lakefs_core.graveler.dump import MANIFEST_KEY
from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import sdk_client, user_client

_names = itertools.count()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("dump-server"))) as s:
        yield s


@pytest.fixture(scope="module")
def admin(srv: LiveServer) -> Client:
    return sdk_client(srv)


def populated(admin: Client, name: str, namespace: str) -> lakefs.Repository:
    """A repository with history on two branches, a merge and two tags."""
    repo = lakefs.Repository(name, client=admin).create(storage_namespace=namespace)
    main = repo.branch("main")
    main.object("a.txt").upload(b"first")
    main.commit("one", metadata={"k": "v"})
    dev = repo.branch("dev").create("main")
    dev.object("b.txt").upload(b"dev data")
    dev.commit("on dev")
    main.object("a.txt").upload(b"second")
    main.commit("two")
    admin.sdk_client.refs_api.merge_into_branch(name, "dev", "main")
    repo.tag("v1").create("main~1")
    repo.tag("v2").create("dev")
    admin.sdk_client.branches_api.create_branch(
        name, lakefs_sdk.BranchCreation(name="hidden", source="dev", hidden=True))
    return repo


def refs_state(admin: Client, repo: str) -> dict[str, Any]:
    """What a restore must give back: logs with commit ids, branches, tags, objects."""
    r = lakefs.Repository(repo, client=admin)
    return {
        "branches": {b.id: b.get_commit().id for b in r.branches()},
        "all_branches": heads(admin, repo, show_hidden=True),
        "tags": {t.id: t.get_commit().id for t in r.tags()},
        "log": [(c.id, c.message, c.parents, c.metadata, c.creation_date, c.meta_range_id)
                for c in r.branch("main").log()],
        "dev_log": [c.id for c in r.branch("dev").log()],
        "objects": {o.path: r.ref("v1").object(o.path).reader("rb").read()
                    for o in r.ref("v1").objects()},
        "main_objects": {o.path: r.branch("main").object(o.path).reader("rb").read()
                         for o in r.branch("main").objects()},
    }


def wait_done(get_status: Any) -> Any:
    deadline = time.monotonic() + 60
    while True:
        status = get_status()
        if status.done or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def heads(admin: Client, repo: str, show_hidden: bool = False) -> dict[str, str]:
    return {r.id: r.commit_id for r in admin.sdk_client.branches_api.list_branches(
        repo, show_hidden=show_hidden).results}


def bare(admin: Client, name: str, namespace: str) -> None:
    admin.sdk_client.repositories_api.create_repository(
        lakefs_sdk.RepositoryCreation(name=name, storage_namespace=namespace), bare=True)


def test_dump_then_restore_into_a_bare_repository_gives_back_every_ref(
        srv: LiveServer, admin: Client) -> None:
    name = f"dump-{next(_names)}"
    namespace = f"local://{name}"
    populated(admin, name, namespace)
    repos = admin.sdk_client.repositories_api
    before = refs_state(admin, name)

    task = repos.dump_submit(name)
    status = wait_done(lambda: repos.dump_status(name, task.id))
    assert (status.done, status.error) == (True, None)
    refs = status.refs
    store = srv.services.blockstores.for_storage_id("")
    for metarange in (refs.commits_meta_range_id, refs.tags_meta_range_id,
                      refs.branches_meta_range_id):
        assert store.exists(f"{namespace}/_lakefs/{metarange}")
    assert b'"commits_meta_range_id"' in store.get(f"{namespace}/{MANIFEST_KEY}")

    repos.delete_repository(name)
    bare(admin, name, namespace)
    restore = repos.restore_submit(name, lakefs_sdk.RefsRestore(
        commits_meta_range_id=refs.commits_meta_range_id,
        tags_meta_range_id=refs.tags_meta_range_id,
        branches_meta_range_id=refs.branches_meta_range_id))
    done = wait_done(lambda: repos.restore_status(name, restore.id))
    assert (done.done, done.error) == (True, None)
    assert refs_state(admin, name) == before
    assert "hidden" in before["all_branches"] and "hidden" not in before["branches"]
    # the restored repository is an ordinary one: it takes new commits
    lakefs.Repository(name, client=admin).branch("main").object("c.txt").upload(b"new")
    assert lakefs.Repository(name, client=admin).branch("main").commit("after").get_commit(
        ).parents == [before["branches"]["main"]]

    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        repos.dump_status(name, restore.id)  # a restore task is no dump task
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        repos.restore_status(name, "no-such-task")


def test_restore_into_a_repository_with_refs_is_refused(admin: Client) -> None:
    name = f"dump-{next(_names)}"
    populated(admin, name, f"local://{name}")
    refs = admin.sdk_client.internal_api.dump_refs(name)
    other = f"dump-{next(_names)}"
    lakefs.Repository(other, client=admin).create(storage_namespace=f"local://{other}")
    body = lakefs_sdk.RefsRestore(**refs.to_dict())
    with pytest.raises(lakefs_sdk.exceptions.BadRequestException,
                       match="can only restore into a bare repository"):
        admin.sdk_client.repositories_api.restore_submit(other, body)
    with pytest.raises(lakefs_sdk.exceptions.BadRequestException,
                       match="can only restore into a bare repository"):
        admin.sdk_client.internal_api.restore_refs(other, body)
    with pytest.raises(lakefs_sdk.exceptions.BadRequestException,
                       match="can only restore into a bare repository"):
        admin.sdk_client.internal_api.restore_refs(name, body)  # into itself
    assert [c.message for c in lakefs.Repository(other, client=admin).branch("main").log()] == [
        "Repository created"]


def test_a_dump_that_does_not_hash_is_refused_before_anything_is_written(
        admin: Client) -> None:
    name = f"dump-{next(_names)}"
    namespace = f"local://{name}"
    populated(admin, name, namespace)
    refs = admin.sdk_client.internal_api.dump_refs(name)
    admin.sdk_client.repositories_api.delete_repository(name)
    bare(admin, name, namespace)
    mixed_up = lakefs_sdk.RefsRestore(commits_meta_range_id=refs.branches_meta_range_id,
                                      tags_meta_range_id=refs.tags_meta_range_id,
                                      branches_meta_range_id=refs.branches_meta_range_id)
    with pytest.raises(lakefs_sdk.exceptions.BadRequestException, match="not a commit record"):
        admin.sdk_client.internal_api.restore_refs(name, mixed_up)
    missing = lakefs_sdk.RefsRestore(commits_meta_range_id="0" * 64,
                                     tags_meta_range_id=refs.tags_meta_range_id,
                                     branches_meta_range_id=refs.branches_meta_range_id)
    task = admin.sdk_client.repositories_api.restore_submit(name, missing)
    status = wait_done(lambda: admin.sdk_client.repositories_api.restore_status(name, task.id))
    assert status.done and status.error and "not found" in status.error
    repo = lakefs.Repository(name, client=admin)
    assert list(repo.tags()) == []
    assert heads(admin, name) == {"main": ""}
    # the right dump still restores afterwards
    admin.sdk_client.internal_api.restore_refs(name, lakefs_sdk.RefsRestore(**refs.to_dict()))
    assert repo.branch("main").get_commit().message.startswith("Merge")


def test_dump_and_restore_on_s3(s3_server: LiveServer, unique_name: str) -> None:
    admin = sdk_client(s3_server)
    namespace = f"s3://{unique_name}/repo"
    populated(admin, "s3-dump", namespace)
    before = refs_state(admin, "s3-dump")
    refs = admin.sdk_client.internal_api.dump_refs("s3-dump")
    admin.sdk_client.repositories_api.delete_repository("s3-dump")
    bare(admin, "s3-restored", namespace)
    admin.sdk_client.internal_api.restore_refs("s3-restored",
                                               lakefs_sdk.RefsRestore(**refs.to_dict()))
    assert refs_state(admin, "s3-restored") == before


def test_dump_and_restore_need_lakefs_permissions(srv: LiveServer, admin: Client) -> None:
    name = f"dump-{next(_names)}"
    populated(admin, name, f"local://{name}")
    target = f"dump-{next(_names)}"
    bare(admin, target, f"local://{target}")
    refs = admin.sdk_client.internal_api.dump_refs(name).to_dict()
    with user_client(srv, FS_READ_ALL) as reader:
        # listing tags, branches and commits is what a dump needs
        assert reader.post(f"/repositories/{name}/dump").status_code == 202
        assert reader.put(f"/repositories/{name}/refs/dump").status_code == 201
        assert reader.post(f"/repositories/{target}/restore", json=refs).status_code == 403
        assert reader.put(f"/repositories/{target}/refs/restore", json=refs).status_code == 403
        assert reader.get(f"/repositories/{target}/restore",
                          params={"task_id": "x"}).status_code == 403
    with user_client(srv) as nobody:
        assert nobody.post(f"/repositories/{name}/dump").status_code == 403
        assert nobody.get(f"/repositories/{name}/dump",
                          params={"task_id": "x"}).status_code == 403
    assert heads(admin, target) == {"main": ""}

