"""Refs through the REST API: diff, merge, merge base and tags."""

from __future__ import annotations

import lakefs
import pytest
from lakefs.exceptions import BadRequestException, ConflictException, NotFoundException

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, read, sdk_client, viewer_client


@pytest.fixture
def client(server: LiveServer) -> lakefs.Client:
    return sdk_client(server)


@pytest.fixture
def repo(client: lakefs.Client) -> lakefs.Repository:
    return lakefs.Repository("repo", client=client).create(storage_namespace="local://repo")


def _diverged(repo: lakefs.Repository) -> tuple[lakefs.Branch, lakefs.Branch]:
    """main and dev: a common base, then changes on each side."""
    main = repo.branch("main")
    put(main, "shared", "base")
    put(main, "to-remove", "r")
    main.commit("base")
    dev = repo.branch("dev").create("main")
    put(dev, "x/dev-1", "d1")
    put(dev, "x/dev-2", "d22")
    put(dev, "y/dev-3", "d333")
    dev.object("to-remove").delete()
    dev.commit("dev work")
    put(main, "main-only", "m")
    main.commit("main work")
    return main, dev


def test_diff_two_and_three_dot(server: LiveServer, repo: lakefs.Repository) -> None:
    main, dev = _diverged(repo)
    three = {c.path: c.type for c in main.diff(dev)}
    assert three == {"x/dev-1": "added", "x/dev-2": "added", "y/dev-3": "added",
                     "to-remove": "removed"}
    two = {c.path: c.type for c in main.diff(dev, type="two_dot")}
    assert two == {**three, "main-only": "removed"}
    sizes = {c.path: c.size_bytes for c in main.diff(dev)}
    assert sizes["x/dev-2"] == 3 and sizes["to-remove"] == 1

    with server.client() as http:
        url = "/repositories/repo/refs/main/diff/dev"
        grouped = http.get(url, params={"delimiter": "/"}).json()
        assert [(d["path"], d["type"], d["path_type"]) for d in grouped["results"]] == [
            ("to-remove", "removed", "object"), ("x/", "prefix_changed", "common_prefix"),
            ("y/", "prefix_changed", "common_prefix")]
        page = http.get(url, params={"amount": 2}).json()
        assert [d["path"] for d in page["results"]] == ["to-remove", "x/dev-1"]
        assert page["pagination"]["has_more"] is True
        page = http.get(url, params={"amount": 2, "after": page["pagination"]["next_offset"]}
                        ).json()
        assert [d["path"] for d in page["results"]] == ["x/dev-2", "y/dev-3"]
        assert page["pagination"]["has_more"] is False
        prefixed = http.get(url, params={"prefix": "x/", "include_right_stats": True}).json()
        assert [d["path"] for d in prefixed["results"]] == ["x/dev-1", "x/dev-2"]
        right = prefixed["results"][0]["right"]
        assert right["checksum"] and isinstance(right["mtime"], int)
        assert http.get(url, params={"type": "four_dot"}).status_code == 400
        assert http.get("/repositories/repo/refs/main/diff/nope").status_code == 404
        assert http.get("/repositories/repo/refs/main/diff/dev",
                        params={"amount": 0}).json()["pagination"]["max_per_page"] == 100


def test_merge(server: LiveServer, repo: lakefs.Repository) -> None:
    main, dev = _diverged(repo)
    before = main.get_commit().id
    merged = dev.merge_into(main, message="bring dev", metadata={"why": "test"})
    commit = repo.commit(merged).get_commit()
    assert commit.parents == [before, dev.get_commit().id]
    assert commit.message == "bring dev"
    assert commit.metadata == {"why": "test", ".lakefs.merge.strategy": "default"}  # lakeFS's
    assert read(main, "x/dev-1") == b"d1"
    assert "to-remove" not in [o.path for o in main.objects()]

    with pytest.raises(BadRequestException) as info:
        dev.merge_into(main)
    assert info.value.body["message"] == "update branch main: no changes"  # lakeFS's text

    with server.client() as http:
        resp = http.post("/repositories/repo/refs/dev/merge/main", json={"squash_merge": True})
        assert (resp.status_code, resp.json()["message"]) == (400, "update branch main: no changes")
        resp = http.post("/repositories/repo/refs/dev/merge/main", json={"strategy": "bogus"})
        assert resp.status_code == 400
        resp = http.post("/repositories/repo/refs/nope/merge/main")
        assert resp.status_code == 404
        resp = http.post("/repositories/repo/refs/dev/merge/nope")
        assert resp.status_code == 404
    assert main.get_commit().id == merged


def test_squash_merge(server: LiveServer, repo: lakefs.Repository) -> None:
    main, dev = _diverged(repo)
    before = main.get_commit().id
    dev_commits = {c.id for c in dev.log()}
    with server.client() as http:
        resp = http.post("/repositories/repo/refs/dev/merge/main",
                         json={"squash_merge": True, "message": "squashed"})
        assert resp.status_code == 200
        squashed = repo.commit(resp.json()["reference"]).get_commit()
        assert squashed.parents == [before]  # dev's history stays out of main
        assert squashed.message == "squashed"
        assert read(main, "x/dev-1") == b"d1" and read(main, "main-only") == b"m"
        assert "to-remove" not in [o.path for o in main.objects()]
        assert not {c.id for c in main.log()} & (dev_commits - {c.id for c in repo.branch(
            "main").log(max_amount=100)})
        assert dev.get_commit().id not in {c.id for c in main.log()}

        # merged again: the content is already there, so nothing to do ...
        resp = http.post("/repositories/repo/refs/dev/merge/main", json={"squash_merge": True})
        assert (resp.status_code, resp.json()["message"]) == (400, "update branch main: no changes")
        # ... unless an empty merge is asked for
        resp = http.post("/repositories/repo/refs/dev/merge/main",
                         json={"squash_merge": True, "allow_empty": True})
        assert resp.status_code == 200
        empty = repo.commit(resp.json()["reference"]).get_commit()
        assert empty.parents == [squashed.id]
        assert empty.meta_range_id == squashed.meta_range_id


def test_merge_with_nothing_new_needs_allow_empty(server: LiveServer,
                                                  repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "base", "b")
    main.commit("base")
    dev = repo.branch("dev").create("main")
    put(dev, "same", "s")
    picked = dev.commit("on dev").get_commit().id
    put(main, "other", "o")
    main.commit("main moves on")
    main.cherry_pick(picked)  # the same change on main, not dev's commit
    head = main.get_commit().id
    with pytest.raises(BadRequestException):
        dev.merge_into(main)
    assert main.get_commit().id == head
    with server.client() as http:
        resp = http.post("/repositories/repo/refs/dev/merge/main", json={"allow_empty": True})
        assert resp.status_code == 200, resp.text
    merged = main.get_commit()
    assert merged.parents == [head, dev.get_commit().id]

    # the same bytes uploaded on each side: the same change, not a conflict
    put(dev, "twice", "same bytes")
    dev.commit("on dev")
    put(main, "twice", "same bytes")
    main.commit("on main")
    with pytest.raises(BadRequestException):
        dev.merge_into(main)
    put(dev, "twice", "other bytes")
    dev.commit("changed on dev")
    with pytest.raises(ConflictException):
        repo.branch("dev").merge_into(repo.branch("main"))  # changed on both sides, unlike


def test_merge_conflict_and_strategies(server: LiveServer, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "f", "base")
    main.commit("base")
    dev = repo.branch("dev").create("main")
    put(dev, "f", "dev")
    dev.commit("dev")
    put(main, "f", "main")
    main.commit("main")
    head = main.get_commit().id

    with pytest.raises(ConflictException) as info:
        dev.merge_into(main)
    assert "conflict" in info.value.body["message"]
    assert main.get_commit().id == head

    with server.client() as http:
        put(main, "dirty", "d")
        resp = http.post("/repositories/repo/refs/dev/merge/main", json={})
        assert resp.status_code == 400
        assert "dirty" in resp.json()["message"]
        main.reset_changes()

    merged = dev.merge_into(main, strategy="source-wins")
    assert read(main, "f") == b"dev"
    assert repo.commit(merged).get_commit().metadata == {".lakefs.merge.strategy": "source-wins"}
    put(main, "f", "main again")
    main.commit("main again")
    put(dev, "f", "dev again")
    dev.commit("dev again")
    # dest wins every conflict: the merge would leave main's content as it is
    head = main.get_commit().id
    with pytest.raises(BadRequestException):
        dev.merge_into(main, strategy="dest-wins")
    assert main.get_commit().id == head
    with server.client() as http:
        resp = http.post("/repositories/repo/refs/dev/merge/main",
                         json={"strategy": "dest-wins", "force": True})
        assert resp.status_code == 200
    assert main.get_commit().parents == [head, dev.get_commit().id]
    assert read(main, "f") == b"main again"


def test_find_merge_base(client: lakefs.Client, repo: lakefs.Repository) -> None:
    main, dev = _diverged(repo)
    base = repo.ref("dev~1").get_commit().id
    result = client.sdk_client.refs_api.find_merge_base("repo", "dev", "main")
    assert result.base_commit_id == base
    assert result.source_commit_id == dev.get_commit().id
    assert result.destination_commit_id == main.get_commit().id
    with pytest.raises(Exception) as info:
        client.sdk_client.refs_api.find_merge_base("repo", "dev", "nope")
    assert getattr(info.value, "status", None) == 404


def test_tags(server: LiveServer, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "f", "v1")
    v1 = main.commit("v1").get_commit().id
    tag = repo.tag("v1.0").create("main")
    assert tag.get_commit().id == v1
    put(main, "f", "v2")
    main.commit("v2")
    assert read(repo.tag("v1.0"), "f") == b"v1"
    assert [c.message for c in repo.tag("v1.0").log()] == ["v1", "Repository created"]
    assert repo.tag("v1.0").create("main", exist_ok=True).get_commit().id == v1
    with pytest.raises(ConflictException):
        repo.tag("v1.0").create("main")
    repo.tag("v2.0").create("main")
    repo.tag("a/nested").create("main~1")
    assert [t.id for t in repo.tags()] == ["a/nested", "v1.0", "v2.0"]
    assert [t.id for t in repo.tags(prefix="v")] == ["v1.0", "v2.0"]

    with server.client() as http:
        assert http.get("/repositories/repo/tags/a/nested").json() == {
            "id": "a/nested", "commit_id": v1}
        page = http.get("/repositories/repo/tags", params={"amount": 1}).json()
        assert page["pagination"] == {"has_more": True, "next_offset": "a/nested",
                                      "results": 1, "max_per_page": 1}
        resp = http.post("/repositories/repo/tags", json={"id": "bad tag", "ref": "main"})
        assert resp.status_code == 400
        resp = http.post("/repositories/repo/tags", json={"id": "t", "ref": "nowhere"})
        assert resp.status_code == 404
        assert http.get("/repositories/repo/tags/nope").status_code == 404
        assert [c.message for c in repo.tag("a/nested").log()] == ["v1", "Repository created"]
        assert repo.tag("a/nested").get_commit().id == v1
        assert [c.path for c in repo.tag("a/nested").diff("v2.0")] == ["f"]
        assert http.delete("/repositories/repo/tags/a/nested").status_code == 204
        assert http.delete("/repositories/repo/tags/a/nested").status_code == 404
    repo.tag("v2.0").delete()
    assert [t.id for t in repo.tags()] == ["v1.0"]
    with pytest.raises(NotFoundException):
        repo.tag("v2.0").get_commit()


def test_ref_routes_need_permissions(server: LiveServer, repo: lakefs.Repository) -> None:
    main, dev = _diverged(repo)
    repo.tag("keep").create("main")
    with viewer_client(server, "reader") as http:
        assert http.get("/repositories/repo/refs/main/diff/dev").status_code == 200
        assert http.get("/repositories/repo/tags").status_code == 200
        for method, path, body in [
            ("POST", "/repositories/repo/refs/dev/merge/main", {}),
            ("POST", "/repositories/repo/tags", {"id": "new", "ref": "main"}),
            ("DELETE", "/repositories/repo/tags/keep", None),
        ]:
            resp = http.request(method, path, json=body)
            assert resp.status_code == 403, (method, path, resp.text)
    assert [t.id for t in repo.tags()] == ["keep"]
    assert main.get_commit().message == "main work"
