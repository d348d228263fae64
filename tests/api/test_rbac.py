"""RBAC matrix over the REST API: what a read-only user, a read-write user, a user
with a deny statement and an anonymous caller may do, and that a refused request
changes nothing."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client

from lakefs_core.auth.throttle import FREE_PAIR_FAILURES
from lakefs_testing.live_server import LiveServer, live_server

_names = itertools.count()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("rbac-server"))) as s:
        yield s


@pytest.fixture(scope="module")
def admin(srv: LiveServer) -> Client:
    return Client(host=srv.endpoint, username=srv.access_key_id,
                  password=srv.secret_access_key)


@dataclass
class World:
    """A repository with committed data, a side branch and a tag."""

    repo: str
    head: str


@pytest.fixture
def world(admin: Client) -> World:
    name = f"rbac-{next(_names)}"
    repo = lakefs.Repository(name, client=admin).create(storage_namespace=f"local://{name}")
    main = repo.branch("main")
    main.object("data/a.csv").upload(b"a,b\n1,2\n")
    main.object("data/b.csv").upload(b"a,b\n3,4\n")
    head = main.commit("seed").get_commit().id
    repo.branch("side").create("main")
    repo.tag("v1").create(head)
    main.object("staged.txt").upload(b"uncommitted")
    return World(repo=name, head=head)


def user_with_policies(srv: LiveServer, admin: Client, *policies: str) -> httpx.Client:
    """A new user with ``policies`` attached directly; an httpx client with its key."""
    auth = admin.sdk_client.auth_api
    user = f"user-{next(_names)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user))
    for policy in policies:
        auth.attach_policy_to_user(user, policy)
    key = auth.create_credentials(user)
    return httpx.Client(base_url=srv.api, auth=(key.access_key_id, key.secret_access_key),
                        timeout=30.0)


def snapshot(srv: LiveServer, repo: str) -> dict[str, Any]:
    """Everything a write could change: refs, listings (staged included) and bytes."""
    with srv.client() as c:
        branches = c.get(f"/repositories/{repo}/branches").json()["results"]
        state: dict[str, Any] = {
            "repos": [r["id"] for r in c.get("/repositories").json()["results"]],
            "branches": {b["id"]: b["commit_id"] for b in branches},
            "tags": {t["id"]: t["commit_id"]
                     for t in c.get(f"/repositories/{repo}/tags").json()["results"]},
        }
        for b in branches:
            listing = c.get(f"/repositories/{repo}/refs/{b['id']}/objects/ls").json()
            state[f"objects@{b['id']}"] = {
                o["path"]: (o["checksum"], o.get("metadata"),
                            c.get(f"/repositories/{repo}/refs/{b['id']}/objects",
                                  params={"path": o["path"]}).content)
                for o in listing["results"]}
    return state


def write_attempts(repo: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, request kwargs) of every kind of write the API offers."""
    objects = f"/repositories/{repo}/branches/main/objects"
    return [
        ("POST", objects, {"params": {"path": "new.txt"}, "content": b"new"}),
        ("POST", objects, {"params": {"path": "data/a.csv"}, "content": b"overwrite"}),
        ("POST", objects, {"params": {"path": "f.bin"}, "files": {"content": b"form"}}),
        ("DELETE", objects, {"params": {"path": "data/a.csv"}}),
        ("POST", f"{objects}/copy", {"params": {"dest_path": "c.csv"},
                                     "json": {"src_path": "data/a.csv"}}),
        ("PUT", f"{objects}/stat/user_metadata", {"params": {"path": "data/a.csv"},
                                                   "json": {"set": {"x": "y"}}}),
        ("GET", f"/repositories/{repo}/branches/main/staging/backing",
         {"params": {"path": "s.bin"}}),
        ("POST", f"/repositories/{repo}/branches/main/commits", {"json": {"message": "m"}}),
        ("POST", f"/repositories/{repo}/branches", {"json": {"name": "nb", "source": "main"}}),
        ("DELETE", f"/repositories/{repo}/branches/side", {}),
        ("POST", f"/repositories/{repo}/tags", {"json": {"id": "v2", "ref": "main"}}),
        ("DELETE", f"/repositories/{repo}/tags/v1", {}),
        ("POST", f"/repositories/{repo}/refs/side/merge/main", {"json": {}}),
        ("PUT", f"/repositories/{repo}/branches/main", {"json": {"type": "reset"}}),
        ("DELETE", f"/repositories/{repo}", {}),
        ("POST", "/repositories", {"json": {"name": f"{repo}-new",
                                            "storage_namespace": f"local://{repo}-new"}}),
    ]


def test_read_only_user_reads_and_every_write_is_403(srv: LiveServer, admin: Client,
                                                     world: World) -> None:
    repo = world.repo
    reader = user_with_policies(srv, admin, "FSReadAll")
    with reader:
        assert repo in [r["id"] for r in reader.get("/repositories").json()["results"]]
        assert reader.get(f"/repositories/{repo}").status_code == 200
        assert {b["id"] for b in reader.get(
            f"/repositories/{repo}/branches").json()["results"]} == {"main", "side"}
        obj = reader.get(f"/repositories/{repo}/refs/main/objects",
                         params={"path": "data/a.csv"})
        assert (obj.status_code, obj.content) == (200, b"a,b\n1,2\n")
        assert reader.get(f"/repositories/{repo}/refs/v1/objects",
                          params={"path": "data/b.csv"}).content == b"a,b\n3,4\n"
        assert reader.get(f"/repositories/{repo}/refs/{world.head}/objects/stat",
                          params={"path": "data/a.csv"}).status_code == 200
        assert [o["path"] for o in reader.get(
            f"/repositories/{repo}/refs/main/objects/ls").json()["results"]] == [
                "data/a.csv", "data/b.csv", "staged.txt"]
        assert reader.get(f"/repositories/{repo}/refs/main/commits").status_code == 200
        assert reader.get(f"/repositories/{repo}/refs/main/diff/side").status_code == 200

        before = snapshot(srv, repo)
        for method, path, kwargs in write_attempts(repo):
            resp = reader.request(method, path, **kwargs)
            assert resp.status_code == 403, (method, path, resp.text)
            assert resp.json()["message"]
        bulk = reader.post(f"/repositories/{repo}/branches/main/objects/delete",
                           json={"paths": ["data/a.csv", "data/b.csv"]})
        assert bulk.status_code == 200
        assert [(e["path"], e["status_code"]) for e in bulk.json()["errors"]] == [
            ("data/a.csv", 403), ("data/b.csv", 403)]
        assert reader.get("/auth/users").status_code == 403
        assert snapshot(srv, repo) == before


def test_read_write_user_writes_but_cannot_manage_repositories_or_auth(
        srv: LiveServer, admin: Client, world: World) -> None:
    repo = world.repo
    writer = user_with_policies(srv, admin, "FSReadWriteAll")
    with writer:
        objects = f"/repositories/{repo}/branches/main/objects"
        assert writer.post(objects, params={"path": "w.txt"}, content=b"w").status_code == 201
        assert writer.delete(objects, params={"path": "data/b.csv"}).status_code == 204
        assert writer.post(f"/repositories/{repo}/branches/main/commits",
                           json={"message": "by writer"}).status_code == 201
        assert writer.post(f"/repositories/{repo}/branches",
                           json={"name": "w-branch", "source": "main"}).status_code == 201
        assert writer.delete(f"/repositories/{repo}/branches/w-branch").status_code == 204
        assert writer.get(f"/repositories/{repo}/refs/main/objects",
                          params={"path": "w.txt"}).content == b"w"

        before = snapshot(srv, repo)
        refused = [
            ("DELETE", f"/repositories/{repo}", {}),
            ("POST", "/repositories", {"json": {"name": f"{repo}-w",
                                                "storage_namespace": f"local://{repo}-w"}}),
            ("GET", "/auth/users", {}),
            ("POST", "/auth/users", {"json": {"id": "sneaky"}}),
            ("POST", "/auth/policies", {"json": {"id": "sneaky", "statement": [
                {"effect": "allow", "action": ["*"], "resource": "*"}]}}),
        ]
        for method, path, kwargs in refused:
            resp = writer.request(method, path, **kwargs)
            assert resp.status_code == 403, (method, path, resp.text)
        assert snapshot(srv, repo) == before
    with srv.client() as c:
        assert c.get("/auth/users/sneaky").status_code == 404
        assert c.get("/auth/policies/sneaky").status_code == 404


def test_deny_statement_on_a_prefix_wins_over_full_access(srv: LiveServer, admin: Client,
                                                          world: World) -> None:
    repo = world.repo
    policy = f"deny-locked-{next(_names)}"
    admin.sdk_client.auth_api.create_policy(lakefs_sdk.Policy(id=policy, statement=[
        lakefs_sdk.Statement(effect="deny", action=["fs:WriteObject", "fs:DeleteObject"],
                             resource=f"arn:lakefs:fs:::repository/{repo}/object/data/*"),
        lakefs_sdk.Statement(effect="deny", action=["fs:ReadObject"],
                             resource=f"arn:lakefs:fs:::repository/{repo}/object/secret/*"),
    ]))
    user = user_with_policies(srv, admin, "FSFullAccess", policy)
    with srv.client() as c:
        c.post(f"/repositories/{repo}/branches/main/objects", params={"path": "secret/k"},
               content=b"hidden")
    objects = f"/repositories/{repo}/branches/main/objects"
    with user:
        assert user.post(objects, params={"path": "free/x"}, content=b"x").status_code == 201
        assert user.post(objects, params={"path": "data/x"}, content=b"x").status_code == 403
        assert user.delete(objects, params={"path": "data/a.csv"}).status_code == 403
        copy_in = user.post(f"{objects}/copy", params={"dest_path": "data/copy"},
                            json={"src_path": "free/x"})
        assert copy_in.status_code == 403
        copy_out = user.post(f"{objects}/copy", params={"dest_path": "free/leak"},
                             json={"src_path": "secret/k"})
        assert copy_out.status_code == 403
        read = f"/repositories/{repo}/refs/main/objects"
        assert user.get(read, params={"path": "secret/k"}).status_code == 403
        assert user.head(read, params={"path": "secret/k"}).status_code == 403
        assert user.get(read, params={"path": "data/a.csv"}).status_code == 200
        bulk = user.post(f"{objects}/delete", json={"paths": ["free/x", "data/a.csv"]})
        assert [(e["path"], e["status_code"]) for e in bulk.json()["errors"]] == [
            ("data/a.csv", 403)]
    with srv.client() as c:
        listing = c.get(f"/repositories/{repo}/refs/main/objects/ls").json()["results"]
    assert [o["path"] for o in listing] == ["data/a.csv", "data/b.csv", "secret/k",
                                            "staged.txt"]


# each from a stranger's address of its own: its failures slow it down (429 past the
# free ones), never the admin at 127.0.0.1 nor each other
@pytest.mark.parametrize(("auth", "address"), [
    (None, "127.0.1.1"), (("AKIAIOSFOLQUICKSTART", "wrong-secret"), "127.0.1.2"),
    (("AKIANOSUCHKEY0000000", "whatever"), "127.0.1.3")],
    ids=["anonymous", "wrong-secret", "unknown-key"])
def test_unauthenticated_requests_get_401_and_change_nothing(
        srv: LiveServer, world: World, auth: tuple[str, str] | None, address: str) -> None:
    repo = world.repo
    before = snapshot(srv, repo)
    stranger = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=srv.api, auth=auth, transport=stranger) as anon:
        reads = [("GET", "/repositories", {}), ("GET", f"/repositories/{repo}", {}),
                 ("GET", f"/repositories/{repo}/refs/main/objects", {"params": {"path": "x"}}),
                 ("GET", f"/repositories/{repo}/refs/main/objects/ls", {}),
                 ("GET", "/auth/users", {}), ("GET", "/user", {})]
        for i, (method, path, kwargs) in enumerate([*reads, *write_attempts(repo)]):
            resp = anon.request(method, path, **kwargs)
            allowed = (401,) if auth is None or i <= FREE_PAIR_FAILURES else (401, 429)
            assert resp.status_code in allowed, (method, path, resp.text)
            assert resp.json()["message"]
    assert snapshot(srv, repo) == before
