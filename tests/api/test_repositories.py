"""Repositories through the REST API: the lakefs SDK and raw HTTP for codes and messages."""

from __future__ import annotations

import io

import httpx
import lakefs
import pyarrow.parquet as pq
import pytest
from lakefs.exceptions import ConflictException, ForbiddenException, NotFoundException

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import sdk_client, viewer_client


@pytest.fixture
def client(server: LiveServer) -> lakefs.Client:
    return sdk_client(server)


def test_create_get_list_delete_with_sdk(client: lakefs.Client) -> None:
    repo = lakefs.Repository("repo-one", client=client).create(
        storage_namespace="local://repo-one", default_branch="trunk")
    props = lakefs.Repository("repo-one", client=client).properties
    assert props.id == "repo-one"
    assert props.default_branch == "trunk"
    assert props.storage_namespace == "local://repo-one"
    assert isinstance(props.creation_date, int) and props.creation_date > 0
    assert [b.id for b in repo.branches()] == ["trunk"]
    head = repo.branch("trunk").get_commit()
    assert head.message == "Repository created" and head.parents == []

    same = lakefs.Repository("repo-one", client=client).create(
        storage_namespace="local://elsewhere", exist_ok=True)
    assert same.properties.storage_namespace == "local://repo-one"
    with pytest.raises(ConflictException):
        lakefs.Repository("repo-one", client=client).create(storage_namespace="local://x")

    assert "repo-one" in [r.id for r in lakefs.repositories(client=client)]
    repo.delete()
    assert "repo-one" not in [r.id for r in lakefs.repositories(client=client)]
    with pytest.raises(NotFoundException):
        repo.delete()


def test_create_uses_default_namespace_prefix(server: LiveServer) -> None:
    with server.client() as http:
        resp = http.post("/repositories", json={"name": "no-namespace"})
        assert resp.status_code == 201, resp.text
        assert resp.json()["storage_namespace"] == "local://no-namespace"
        assert resp.json()["default_branch"] == "main"
        assert http.get("/repositories/no-namespace").json()["id"] == "no-namespace"


def test_create_refuses_bad_input_and_changes_nothing(server: LiveServer) -> None:
    with server.client() as http:
        for body, needle in [
            ({"name": "Bad_Name", "storage_namespace": "local://bad"}, "repository id"),
            ({"name": "ok-name", "storage_namespace": "s3://bucket/x"}, "storage namespace"),
            ({"name": "ok-name", "storage_namespace": "nonsense"}, "storage namespace"),
            ({"name": "ok-name", "storage_namespace": "local://a", "default_branch": "-x"},
             "branch name"),
            ({"name": "ok-name", "storage_namespace": "local://a", "storage_id": "nope"},
             "nope"),
            ({"storage_namespace": "local://a"}, "name"),
        ]:
            resp = http.post("/repositories", json=body)
            assert resp.status_code == 400, (body, resp.text)
            assert needle in resp.json()["message"], resp.json()
        resp = http.post("/repositories?bare=true",
                         json={"name": "ok-name", "storage_namespace": "local://b",
                               "sample_data": True})
        assert resp.status_code == 400
        assert http.get("/repositories").json()["results"] == []
        assert http.get("/repositories?amount=1001").status_code == 400


def test_namespace_in_use_conflicts(server: LiveServer) -> None:
    with server.client() as http:
        assert http.post("/repositories", json={"name": "first",
                                                "storage_namespace": "local://shared"}
                         ).status_code == 201
        resp = http.post("/repositories", json={"name": "second",
                                                "storage_namespace": "local://shared"})
        assert resp.status_code == 409
        assert "already in use" in resp.json()["message"]


def test_list_pagination_prefix_and_search(server: LiveServer) -> None:
    names = ["alpha-1", "alpha-2", "alpha-3", "beta-1", "beta-22"]
    with server.client() as http:
        for name in names:
            assert http.post("/repositories", json={"name": name}).status_code == 201
        seen: list[str] = []
        after = ""
        while True:
            page = http.get("/repositories", params={"amount": 2, "after": after}).json()
            assert page["pagination"]["max_per_page"] == 2
            assert page["pagination"]["results"] == len(page["results"])
            seen += [r["id"] for r in page["results"]]
            if not page["pagination"]["has_more"]:
                assert page["pagination"]["next_offset"] == ""
                break
            after = page["pagination"]["next_offset"]
            assert after == seen[-1]
        assert seen == names
        prefixed = http.get("/repositories", params={"prefix": "alpha"}).json()
        assert [r["id"] for r in prefixed["results"]] == names[:3]
        searched = http.get("/repositories", params={"search": "-2", "amount": 1}).json()
        assert [r["id"] for r in searched["results"]] == ["alpha-2"]
        assert searched["pagination"]["has_more"] is True
        rest = http.get("/repositories", params={
            "search": "-2", "after": searched["pagination"]["next_offset"]}).json()
        assert [r["id"] for r in rest["results"]] == ["beta-22"]
        assert rest["pagination"]["has_more"] is False
        # amount 0 and -1 mean the default page size
        assert http.get("/repositories?amount=-1").json()["pagination"]["max_per_page"] == 100


def test_missing_repository_is_404_with_message(server: LiveServer) -> None:
    with server.client() as http:
        for method, path in [("GET", "/repositories/nothing-here"),
                             ("DELETE", "/repositories/nothing-here"),
                             ("GET", "/repositories/nothing-here/metadata"),
                             ("GET", "/repositories/nothing-here/branches")]:
            resp = http.request(method, path)
            assert resp.status_code == 404, (method, path)
            assert "nothing-here" in resp.json()["message"] or resp.json()["message"]


def test_requests_without_credentials_are_401(server: LiveServer) -> None:
    resp = httpx.post(f"{server.api}/repositories", json={"name": "sneaky"})
    assert resp.status_code == 401
    assert resp.json()["message"]
    with server.client() as http:
        assert http.get("/repositories").json()["results"] == []


def test_sample_data(client: lakefs.Client) -> None:
    repo = lakefs.Repository("lakes", client=client).create(
        storage_namespace="local://lakes", include_samples=True)
    log = list(repo.branch("main").log())
    assert [c.message for c in log] == ["Add sample data", "Repository created"]
    paths = sorted(o.path for o in repo.branch("main").objects())
    assert paths == ["README.md", "lakes.parquet"]
    readme = repo.ref(log[0].id).object("README.md").reader(mode="r").read()
    assert "lakes.parquet" in readme
    data = repo.branch("main").object("lakes.parquet").reader(mode="rb").read()
    table = pq.read_table(io.BytesIO(data))
    assert table.num_rows >= 200
    assert {"name", "country", "area_km2"} <= set(table.column_names)
    assert len(set(table.column("name").to_pylist())) == table.num_rows


def test_bare_repository_has_no_commit(server: LiveServer) -> None:
    with server.client() as http:
        resp = http.post("/repositories?bare=true",
                         json={"name": "bare-repo", "storage_namespace": "local://bare-repo"})
        assert resp.status_code == 201
        assert http.get("/repositories/bare-repo/branches/main").json()["commit_id"] == ""
        assert http.get("/repositories/bare-repo/refs/main/commits").status_code == 404


def test_read_only_repository(server: LiveServer, client: lakefs.Client) -> None:
    with server.client() as http:
        resp = http.post("/repositories", json={"name": "frozen", "read_only": True,
                                                "sample_data": True})
        assert resp.status_code == 201 and resp.json()["read_only"] is True
        repo = lakefs.Repository("frozen", client=client)
        assert [c.message for c in repo.branch("main").log()][0] == "Add sample data"
        with pytest.raises(ForbiddenException):
            repo.branch("dev").create("main")
        resp = http.delete("/repositories/frozen")
        assert resp.status_code == 403
        assert "read-only" in resp.json()["message"]
        assert http.get("/repositories/frozen").status_code == 200
        assert http.delete("/repositories/frozen", params={"force": True}).status_code == 204
        assert http.get("/repositories/frozen").status_code == 404


def test_repository_metadata(server: LiveServer, client: lakefs.Client) -> None:
    repo = lakefs.Repository("meta", client=client).create(storage_namespace="local://meta")
    assert repo.metadata == {}
    with server.client() as http:
        resp = http.post("/repositories/meta/metadata", json={"metadata": {"a": "1", "b": "2"}})
        assert resp.status_code == 204
        resp = http.post("/repositories/meta/metadata", json={"metadata": {"b": "3"}})
        assert resp.status_code == 204
        assert repo.metadata == {"a": "1", "b": "3"}
        resp = http.request("DELETE", "/repositories/meta/metadata",
                            json={"keys": ["a", "missing"]})
        assert resp.status_code == 204
        assert http.get("/repositories/meta/metadata").json() == {"b": "3"}
        assert http.post("/repositories/meta/metadata", json={"metadata": "x"}
                         ).status_code == 400


def test_branch_protection(server: LiveServer, client: lakefs.Client) -> None:
    repo = lakefs.Repository("guarded", client=client).create(storage_namespace="local://guarded")
    repo.branch("dev").create("main")
    with server.client() as http:
        url = "/repositories/guarded/settings/branch_protection"
        resp = http.get(url)
        assert resp.status_code == 200 and resp.json() == []
        etag = resp.headers["etag"]
        assert http.put(url, json=[{"pattern": "main"}], headers={"If-Match": '"stale"'}
                        ).status_code == 412
        assert http.get(url).json() == []
        assert http.put(url, json=[{"pattern": "main"}, {"pattern": "release-*"}],
                        headers={"If-Match": etag}).status_code == 204
        assert http.get(url).json() == [{"pattern": "main"}, {"pattern": "release-*"}]
        assert http.put(url, json=[{"pattern": ""}]).status_code == 400

        # protected: direct writes and commits are refused, merges are accepted
        repo.branch("dev").object("f.txt").upload(b"data")
        repo.branch("dev").commit("on dev")
        resp = http.post("/repositories/guarded/branches/main/commits",
                         json={"message": "x", "allow_empty": True})
        assert resp.status_code == 403
        assert resp.json()["message"] == "cannot commit to protected branch"
        assert repo.branch("dev").merge_into("main")

        # the internal endpoints edit one rule at a time
        internal = "/repositories/guarded/branch_protection"
        assert http.get(f"{internal}/set_allowed").status_code == 204
        assert http.post(internal, json={"pattern": "prod"}).status_code == 204
        again = http.post(internal, json={"pattern": "prod"})
        assert again.status_code == 409
        assert again.json()["message"] == "branch protection rule already exists: not unique"
        assert [r["pattern"] for r in http.get(internal).json()] == ["main", "release-*", "prod"]
        assert http.request("DELETE", internal, json={"pattern": "main"}).status_code == 204
        missing = http.request("DELETE", internal, json={"pattern": "main"})
        assert missing.status_code == 404
        assert missing.json()["message"] == "branch protection rule does not exist: not found"
        assert http.get(url).json() == [{"pattern": "release-*"}, {"pattern": "prod"}]
        assert http.post("/repositories/guarded/branches/main/commits",
                         json={"message": "now allowed", "allow_empty": True}
                         ).status_code == 201


def test_read_only_user_can_read_and_cannot_write(server: LiveServer) -> None:
    with server.client() as admin:
        assert admin.post("/repositories", json={"name": "shared-repo"}).status_code == 201
        assert admin.put("/repositories/shared-repo/settings/branch_protection",
                         json=[{"pattern": "main"}]).status_code == 204
    with viewer_client(server) as viewer:
        assert viewer.get("/repositories").json()["results"][0]["id"] == "shared-repo"
        assert viewer.get("/repositories/shared-repo").status_code == 200
        assert viewer.get("/repositories/shared-repo/metadata").status_code == 200
        for method, path, body in [
            ("POST", "/repositories", {"name": "mine"}),
            ("DELETE", "/repositories/shared-repo", None),
            ("POST", "/repositories/shared-repo/metadata", {"metadata": {"k": "v"}}),
            ("PUT", "/repositories/shared-repo/settings/branch_protection", []),
        ]:
            resp = viewer.request(method, path, json=body)
            assert resp.status_code == 403, (method, path, resp.text)
            assert resp.json()["message"]
    with server.client() as admin:
        assert [r["id"] for r in admin.get("/repositories").json()["results"]] == ["shared-repo"]
        assert admin.get("/repositories/shared-repo/metadata").json() == {}
        assert admin.get("/repositories/shared-repo/settings/branch_protection").json() == [
            {"pattern": "main"}]


@pytest.mark.parametrize("namespace", [
    "local://team//secret", "local://team/./x", "local://team/../x", "local:///",
    "local://a\x00b", "local://" + "/".join(["s"] * 2000), "local://" + "x" * 300,
    "s3://bucket/x", "nothing",
])
def test_bad_storage_namespaces_are_400(server: LiveServer, namespace: str) -> None:
    with server.client() as c:
        r = c.post("/repositories", json={"name": "bad-ns", "storage_namespace": namespace})
        assert r.status_code == 400, r.text
        assert c.get("/repositories/bad-ns").status_code == 404


def test_namespaces_do_not_overlap(server: LiveServer) -> None:
    with server.client() as c:
        assert c.post("/repositories", json={
            "name": "team", "storage_namespace": "local://team/data"}).status_code == 201
        for taken in ("local://team/data", "local://team/data/", "local://team/data/inner",
                      "local://team"):
            r = c.post("/repositories", json={"name": "again", "storage_namespace": taken})
            assert r.status_code == 409, (taken, r.text)
        assert c.post("/repositories", json={
            "name": "sibling", "storage_namespace": "local://team/database"}).status_code == 201
