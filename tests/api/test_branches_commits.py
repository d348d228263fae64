"""Branches and commits through the REST API: the lakefs SDK and raw HTTP."""

from __future__ import annotations

from datetime import UTC, datetime

import lakefs
import pytest
from lakefs.exceptions import (
    BadRequestException,
    ConflictException,
    NotFoundException,
    TransactionException,
)

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, read, sdk_client, viewer_client


@pytest.fixture
def client(server: LiveServer) -> lakefs.Client:
    return sdk_client(server)


@pytest.fixture
def repo(client: lakefs.Client) -> lakefs.Repository:
    return lakefs.Repository("repo", client=client).create(storage_namespace="local://repo")


def test_create_branch_returns_commit_id_as_text(server: LiveServer,
                                                 repo: lakefs.Repository) -> None:
    main_head = repo.branch("main").get_commit().id
    with server.client() as http:
        resp = http.post("/repositories/repo/branches", json={"name": "dev", "source": "main"})
        assert resp.status_code == 201
        assert resp.headers["content-type"].startswith("text/plain")
        assert resp.text == main_head
        assert http.get("/repositories/repo/branches/dev").json() == {
            "id": "dev", "commit_id": main_head}
        resp = http.post("/repositories/repo/branches", json={"name": "dev", "source": "main"})
        assert resp.status_code == 409
        assert resp.json()["message"]
        resp = http.post("/repositories/repo/branches", json={"name": "b@d", "source": "main"})
        assert resp.status_code == 400
        assert "branch name" in resp.json()["message"]
        resp = http.post("/repositories/repo/branches", json={"name": "x", "source": "nowhere"})
        assert resp.status_code == 404
        assert http.get("/repositories/repo/branches/x").status_code == 404
        assert http.get("/repositories/repo/branches/nope").status_code == 404
    assert repo.branch("feature").create("dev").get_commit().id == main_head
    assert repo.branch("feature").create("dev", exist_ok=True).id == "feature"
    with pytest.raises(ConflictException):
        repo.branch("feature").create("dev")


def test_list_branches_paginates_and_hides_hidden(server: LiveServer,
                                                  repo: lakefs.Repository) -> None:
    for name in ["b1", "b2", "b3", "b4"]:
        repo.branch(name).create("main")
    with server.client() as http:
        assert http.post("/repositories/repo/branches",
                         json={"name": "b25", "source": "main", "hidden": True}
                         ).status_code == 201
        names: list[str] = []
        after = ""
        while True:
            page = http.get("/repositories/repo/branches",
                            params={"amount": 2, "after": after}).json()
            names += [r["id"] for r in page["results"]]
            if not page["pagination"]["has_more"]:
                break
            after = page["pagination"]["next_offset"]
        assert names == ["b1", "b2", "b3", "b4", "main"]
        shown = http.get("/repositories/repo/branches", params={"show_hidden": True}).json()
        assert [r["id"] for r in shown["results"]] == ["b1", "b2", "b25", "b3", "b4", "main"]
        assert http.get("/repositories/repo/branches/b25").status_code == 200
        # a branch re-created under a hidden branch's name is visible
        assert http.delete("/repositories/repo/branches/b25").status_code == 204
        assert http.post("/repositories/repo/branches",
                         json={"name": "b25", "source": "main"}).status_code == 201
        listed = http.get("/repositories/repo/branches", params={"prefix": "b2"}).json()
        assert [r["id"] for r in listed["results"]] == ["b2", "b25"]


def test_delete_branch(server: LiveServer, repo: lakefs.Repository) -> None:
    dev = repo.branch("dev").create("main")
    put(dev, "f", b"x")
    dev.delete()
    assert [b.id for b in repo.branches()] == ["main"]
    with pytest.raises(NotFoundException):
        dev.delete()
    with server.client() as http:
        resp = http.delete("/repositories/repo/branches/main")
        assert resp.status_code == 400
        assert "default branch" in resp.json()["message"]
    # a branch created again under the same name starts clean
    assert list(repo.branch("dev").create("main").uncommitted()) == []


def test_commit_get_and_no_changes(server: LiveServer, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "data/a.txt", "alpha")
    ref = main.commit("first data", metadata={"owner": "team-a"})
    commit = ref.get_commit()
    assert commit.message == "first data"
    assert commit.metadata == {"owner": "team-a"}
    assert commit.committer == "admin"
    assert len(commit.parents) == 1
    assert main.get_commit().id == commit.id  # a branch name resolves to its head
    assert repo.commit(commit.id[:12]).get_commit().id == commit.id
    assert read(repo.ref(commit.id), "data/a.txt") == b"alpha"

    with pytest.raises(BadRequestException) as info:
        main.commit("nothing to commit")
    assert info.value.body["message"] == "commit: no changes"  # lakeFS's text
    empty = main.commit("empty on purpose", allow_empty=True).get_commit()
    assert empty.parents == [commit.id]

    with server.client() as http:
        resp = http.post("/repositories/repo/branches/main/commits",
                         json={"message": "dated", "allow_empty": True, "date": 1_000_000})
        assert resp.status_code == 201
        body = resp.json()
        assert body["creation_date"] == 1_000_000
        assert body["generation"] == 4 and body["meta_range_id"]
        assert http.get(f"/repositories/repo/commits/{body['id']}").json() == body
        assert http.get("/repositories/repo/commits/main~3").json()["message"] == (
            "Repository created")
        assert http.get("/repositories/repo/commits/" + "0" * 64).status_code == 404
        resp = http.post("/repositories/repo/branches/nope/commits", json={"message": "m"})
        assert resp.status_code == 404
        resp = http.post("/repositories/repo/branches/main/commits", json={"metadata": {}})
        assert resp.status_code == 400


def test_log_pagination_and_filters(server: LiveServer, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    ids = []
    for i in range(5):
        put(main, f"dir{i % 2}/f{i}", str(i))
        ids.append(main.commit(f"c{i}").get_commit().id)
    ids.reverse()  # newest first
    everything = [c.id for c in main.log()]
    assert everything[:5] == ids and len(everything) == 6
    assert [c.id for c in main.log(max_amount=2)] == ids[:2]

    with server.client() as http:
        url = "/repositories/repo/refs/main/commits"
        page = http.get(url, params={"amount": 2}).json()
        assert [c["id"] for c in page["results"]] == ids[:2]
        assert page["pagination"] == {"has_more": True, "next_offset": ids[1], "results": 2,
                                      "max_per_page": 2}
        page = http.get(url, params={"amount": 2, "after": ids[1]}).json()
        assert [c["id"] for c in page["results"]] == ids[2:4]
        limited = http.get(url, params={"amount": 2, "limit": True}).json()
        assert limited["pagination"]["has_more"] is False
        by_prefix = http.get(url, params={"prefixes": "dir1/"}).json()
        assert [c["message"] for c in by_prefix["results"]] == ["c3", "c1"]
        by_object = http.get(url, params=[("objects", "dir0/f0"), ("objects", "dir0/f4")]
                             ).json()
        assert [c["message"] for c in by_object["results"]] == ["c4", "c0"]
        stopped = http.get(url, params={"stop_at": ids[2]}).json()
        assert [c["id"] for c in stopped["results"]] == ids[:3]
        stopped = http.get(url, params={"stop_at": ids[2], "amount": 2}).json()
        assert stopped["pagination"]["has_more"] is True
        future = datetime(2999, 1, 1, tzinfo=UTC).isoformat()
        assert http.get(url, params={"since": future}).json()["results"] == []
        assert len(http.get(url, params={"since": "1970-01-02T00:00:00Z"}).json()["results"]
                   ) == 6
        assert http.get("/repositories/repo/refs/nope/commits").status_code == 404
        assert http.get(url, params={"amount": 5000}).status_code == 400


def test_log_first_parent(repo: lakefs.Repository) -> None:
    main, dev = repo.branch("main"), repo.branch("dev").create("main")
    put(dev, "d", "dev")
    dev.commit("on dev")
    put(main, "m", "main")
    main.commit("on main")
    dev.merge_into(main)
    assert [c.message for c in main.log(first_parent=True)] == [
        "Merge 'dev' into 'main'", "on main", "Repository created"]
    assert sorted(c.message for c in main.log()) == sorted([
        "Merge 'dev' into 'main'", "on main", "on dev", "Repository created"])


def test_uncommitted_diff_and_reset(server: LiveServer, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "keep.txt", "k")
    put(main, "gone.txt", "g")
    main.commit("base")
    put(main, "a/one", "1")
    put(main, "a/two", "22")
    put(main, "b/three", "333")
    put(main, "keep.txt", "changed")
    main.object("gone.txt").delete()

    changes = {c.path: (c.type, c.size_bytes) for c in main.uncommitted()}
    assert changes == {"a/one": ("added", 1), "a/two": ("added", 2), "b/three": ("added", 3),
                       "keep.txt": ("changed", 7), "gone.txt": ("removed", 0)}
    # (lakeFS: a staged removal is a tombstone, so it reports size 0)
    with server.client() as http:
        url = "/repositories/repo/branches/main/diff"
        grouped = http.get(url, params={"delimiter": "/"}).json()
        assert [(d["path"], d["path_type"]) for d in grouped["results"]] == [
            ("a/", "common_prefix"), ("b/", "common_prefix"), ("gone.txt", "object"),
            ("keep.txt", "object")]
        page = http.get(url, params={"delimiter": "/", "amount": 1}).json()
        assert [d["path"] for d in page["results"]] == ["a/"]
        assert page["pagination"]["has_more"] is True
        page = http.get(url, params={"delimiter": "/", "amount": 2, "after": "a/"}).json()
        assert [d["path"] for d in page["results"]] == ["b/", "gone.txt"]
        assert [d["path"] for d in http.get(url, params={"prefix": "a/"}).json()["results"]
                ] == ["a/one", "a/two"]

        assert http.put("/repositories/repo/branches/main", json={"type": "object"}
                        ).status_code == 400
        assert http.put("/repositories/repo/branches/main", json={"type": "bogus"}
                        ).status_code == 400
    main.reset_changes("object", "keep.txt")
    main.reset_changes("common_prefix", "a/")
    assert sorted(c.path for c in main.uncommitted()) == ["b/three", "gone.txt"]
    main.reset_changes()
    assert list(main.uncommitted()) == []
    assert read(main, "keep.txt") == b"k"


def test_revert_and_cherry_pick(repo: lakefs.Repository) -> None:
    main, dev = repo.branch("main"), repo.branch("dev").create("main")
    put(main, "file", "v1")
    main.commit("v1")
    put(main, "file", "v2")
    main.commit("v2")
    reverted = main.revert(main.get_commit().id)
    assert reverted.message.startswith("Revert ")
    assert read(main, "file") == b"v1"
    with pytest.raises(BadRequestException):
        main.revert("main~3")  # the first commit has no parent to revert to

    put(dev, "feature", "f")
    picked_from = dev.commit("feature work", metadata={"ticket": "7"}).get_commit()
    put(dev, "other", "o")
    dev.commit("not picked")
    picked = main.cherry_pick(picked_from.id)
    assert picked.message == "feature work"
    assert picked.metadata == {"ticket": "7", "cherry-pick-origin": picked_from.id,
                               "cherry-pick-committer": "admin"}
    assert read(main, "feature") == b"f"
    assert "other" not in [o.path for o in main.objects()]
    with pytest.raises(BadRequestException):
        main.cherry_pick(picked_from.id)  # applied already: no changes


def test_revert_allow_empty_and_errors(server: LiveServer, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "f", "1")
    first = main.commit("add f").get_commit().id
    put(main, "g", "0")
    main.commit("other")
    main.revert(first)
    with server.client() as http:
        url = "/repositories/repo/branches/main/revert"
        resp = http.post(url, json={"ref": first, "parent_number": 0})
        assert resp.status_code == 400  # f is already gone: no changes
        resp = http.post(url, json={"ref": first, "parent_number": 0, "allow_empty": True})
        assert resp.status_code == 204
        assert main.get_commit().message == f"Revert {first}"
        put(main, "dirty", "d")
        resp = http.post(url, json={"ref": first, "parent_number": 0})
        assert resp.status_code == 400
        assert "dirty" in resp.json()["message"]
        resp = http.post(url, json={"ref": "nowhere", "parent_number": 0})
        assert resp.status_code == 404


def test_hard_reset(client: lakefs.Client, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    start = main.get_commit().id
    put(main, "f", "1")
    main.commit("one")
    put(main, "staged", "s")
    client.sdk_client.experimental_api.hard_reset_branch("repo", "main", ref=start)
    assert main.get_commit().id == start
    assert list(main.uncommitted()) == []
    assert list(main.objects()) == []


def test_transaction_commits_and_merges(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    with main.transact(commit_message="tx work", commit_metadata={"k": "v"}) as tx:
        tx.object("tx/file").upload(b"inside")
        assert "tx/file" not in [o.path for o in main.objects()]
        # the ephemeral branch is hidden from default listings
        assert [b.id for b in repo.branches()] == ["main"]
    assert read(main, "tx/file") == b"inside"
    log = list(main.log(max_amount=2))
    assert log[0].message.startswith("Merge transaction")
    assert repo.commit(log[0].parents[1]).get_commit().message == "tx work"
    assert [b.id for b in repo.branches()] == ["main"]

    with pytest.raises(RuntimeError), main.transact(commit_message="aborted") as tx:
        tx.object("tx/never").upload(b"x")
        raise RuntimeError("abort")
    assert "tx/never" not in [o.path for o in main.objects()]
    assert [b.id for b in repo.branches()] == ["main"]

    # a transaction that conflicts with its source branch fails and leaves main alone
    with pytest.raises(TransactionException), main.transact(commit_message="late") as tx:
        tx.object("tx/file").upload(b"from tx")
        main.object("tx/file").upload(b"from main")
        main.commit("concurrent")
    assert read(main, "tx/file") == b"from main"


def test_branch_routes_need_permissions(server: LiveServer, repo: lakefs.Repository) -> None:
    head = repo.branch("main").get_commit().id
    with viewer_client(server, "reader") as http:
        assert http.get("/repositories/repo/branches").status_code == 200
        assert http.get("/repositories/repo/refs/main/commits").status_code == 200
        for method, path, body in [
            ("POST", "/repositories/repo/branches", {"name": "dev", "source": "main"}),
            ("DELETE", "/repositories/repo/branches/main", None),
            ("POST", "/repositories/repo/branches/main/commits",
             {"message": "m", "allow_empty": True}),
            ("PUT", "/repositories/repo/branches/main", {"type": "reset"}),
            ("POST", "/repositories/repo/branches/main/revert", {"ref": "main",
                                                                 "parent_number": 0}),
        ]:
            resp = http.request(method, path, json=body)
            assert resp.status_code == 403, (method, path, resp.text)
    assert [b.id for b in repo.branches()] == ["main"]
    assert repo.branch("main").get_commit().id == head


def test_revert_and_cherry_pick_with_commit_overrides(server: LiveServer,
                                                      repo: lakefs.Repository) -> None:
    main, dev = repo.branch("main"), repo.branch("dev").create("main")
    put(main, "file", "v1")
    first = main.commit("v1").get_commit().id
    put(dev, "feature", "f")
    picked = dev.commit("feature", metadata={"ticket": "7"}).get_commit().id
    with server.client() as http:
        resp = http.post("/repositories/repo/branches/main/cherry-pick", json={
            "ref": picked, "commit_overrides": {"message": "picked", "metadata": {"k": "v"}}})
        assert resp.status_code == 201
        assert (resp.json()["message"], resp.json()["metadata"]) == ("picked", {
            "ticket": "7", "k": "v", "cherry-pick-origin": picked,
            "cherry-pick-committer": "admin"})
        assert read(main, "feature") == b"f"

        resp = http.post("/repositories/repo/branches/main/revert", json={
            "ref": first, "parent_number": 0,
            "commit_overrides": {"message": "undo v1", "metadata": {"why": "bad"}}})
        assert resp.status_code == 204
        head = main.get_commit()
        assert (head.message, head.metadata) == ("undo v1", {"why": "bad"})
        assert "file" not in [o.path for o in main.objects()]

        # an empty revert keeps the overrides too
        resp = http.post("/repositories/repo/branches/main/revert", json={
            "ref": first, "parent_number": 0, "allow_empty": True,
            "commit_overrides": {"message": "again"}})
        assert resp.status_code == 204
        assert main.get_commit().message == "again"
        # only the message overridden: the picked commit's metadata stays
        put(dev, "more", "m")
        picked = dev.commit("more", metadata={"ticket": "8"}).get_commit().id
        resp = http.post("/repositories/repo/branches/main/cherry-pick", json={
            "ref": picked, "commit_overrides": {"message": "more, renamed"}})
        assert (resp.json()["message"], resp.json()["metadata"]) == ("more, renamed", {
            "ticket": "8", "cherry-pick-origin": picked, "cherry-pick-committer": "admin"})


def test_commit_of_a_source_metarange(server: LiveServer, repo: lakefs.Repository) -> None:
    main, dev = repo.branch("main"), repo.branch("dev").create("main")
    put(main, "base", "b")
    base = main.commit("base").get_commit()
    put(dev, "new", "n")
    dev_head = dev.commit("dev").get_commit()
    url = "/repositories/repo/branches/main/commits"
    with server.client() as http:
        resp = http.post(url, params={"source_metarange": dev_head.meta_range_id},
                         json={"message": "take dev's tree", "metadata": {"m": "1"}})
        assert resp.status_code == 201, resp.text
        made = resp.json()
        assert made["parents"] == [base.id]
        assert made["meta_range_id"] == dev_head.meta_range_id
        assert made["metadata"] == {"m": "1"}
        assert read(main, "new") == b"n" and main.get_commit().id == made["id"]

        # the same tree again: no changes, unless allowed
        resp = http.post(url, params={"source_metarange": dev_head.meta_range_id},
                         json={"message": "again"})
        assert (resp.status_code, resp.json()["message"]) == (400, "commit: no changes")
        resp = http.post(url, params={"source_metarange": dev_head.meta_range_id},
                         json={"message": "again", "allow_empty": True})
        assert resp.status_code == 201

        head = main.get_commit().id
        put(main, "dirty", "d")
        resp = http.post(url, params={"source_metarange": base.meta_range_id},
                         json={"message": "over staged changes"})
        assert (resp.status_code, resp.json()["message"]) == (
            400, "uncommitted changes (dirty branch)")
        main.reset_changes()
        resp = http.post(url, params={"source_metarange": "0" * 64}, json={"message": "m"})
        assert resp.status_code == 404
        resp = http.post(url, params={"source_metarange": "../../etc"}, json={"message": "m"})
        assert resp.status_code == 400
        assert main.get_commit().id == head
