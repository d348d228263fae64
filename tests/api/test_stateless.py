"""Two server processes over one database (PostgreSQL, or a DynamoDB table) and one
store serve the same data and the same users; on DynamoDB nothing else is shared
(each process has its own data directory)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lakefs
import pytest

from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV
from tests.api.sdk_support import sdk_client


def database_env(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """The ``LAKEFS_DATABASE_*`` settings of a fresh database of ``kind``."""
    if kind == "postgres":
        return {"LAKEFS_DATABASE_TYPE": "postgres",
                "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING": request.getfixturevalue("pg_url")}
    return {
        "LAKEFS_DATABASE_TYPE": "dynamodb",
        "LAKEFS_DATABASE_DYNAMODB_TABLE_NAME": request.getfixturevalue("unique_name"),
        "LAKEFS_DATABASE_DYNAMODB_ENDPOINT": request.getfixturevalue("moto_endpoint"),
        "LAKEFS_DATABASE_DYNAMODB_AWS_REGION": MOTO_ENV["AWS_DEFAULT_REGION"],
        "LAKEFS_DATABASE_DYNAMODB_AWS_ACCESS_KEY_ID": MOTO_ENV["AWS_ACCESS_KEY_ID"],
        "LAKEFS_DATABASE_DYNAMODB_AWS_SECRET_ACCESS_KEY": MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
    }


def sqlite_files(*data_dirs: Path) -> list[Path]:
    return [p for d in data_dirs for p in d.rglob("*") if p.suffix in (".db", ".sqlite")]


@pytest.mark.parametrize("database", ["postgres", "dynamodb"])
def test_two_servers_share_one_database_and_store(tmp_path: Path, database: str,
                                                  request: pytest.FixtureRequest) -> None:
    shared = {
        **database_env(database, tmp_path, request),
        "LAKEFS_BLOCKSTORE_TYPE": "local",
        "LAKEFS_BLOCKSTORE_LOCAL_PATH": str(tmp_path / "store"),
        "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "a shared secret for both servers",
    }
    with live_server(str(tmp_path / "one"), shared) as one, \
            live_server(str(tmp_path / "two"), shared) as two:
        a, b = sdk_client(one), sdk_client(two)
        lakefs.Repository("shared", client=a).create(storage_namespace="local://shared")
        assert lakefs.Repository("shared", client=b).properties.storage_namespace == (
            "local://shared")

        # a write and commit through one process are visible through the other at once
        main_a = lakefs.Repository("shared", client=a).branch("main")
        main_a.object("data/f.txt").upload(b"written through one")
        main_b = lakefs.Repository("shared", client=b).branch("main")
        assert [c.path for c in main_b.uncommitted()] == ["data/f.txt"]
        committed = main_a.commit("from one").get_commit()
        assert main_b.get_commit().id == committed.id
        assert main_b.object("data/f.txt").reader(mode="rb").read() == b"written through one"
        assert [c.message for c in main_b.log()] == ["from one", "Repository created"]

        # and the other way round: branch, commit and merge through two, read through one
        dev_b = lakefs.Repository("shared", client=b).branch("dev").create("main")
        dev_b.object("data/g.txt").upload(b"written through two")
        dev_b.commit("from two")
        merged = dev_b.merge_into("main")
        assert main_a.get_commit().id == merged
        assert main_a.object("data/g.txt").reader(mode="rb").read() == b"written through two"
        lakefs.Repository("shared", client=b).tag("v1").create("main")
        assert lakefs.Repository("shared", client=a).tag("v1").get_commit().id == merged

        # raw HTTP agrees: same branches, same head, whichever process answers
        with one.client() as h1, two.client() as h2:
            assert h1.get("/repositories/shared/branches").json() == (
                h2.get("/repositories/shared/branches").json())
            assert h2.delete("/repositories/shared/branches/dev").status_code == 204
            assert h1.get("/repositories/shared/branches/dev").status_code == 404
            assert h1.delete("/repositories/shared").status_code == 204
            assert h2.get("/repositories/shared").status_code == 404


@pytest.fixture(scope="module")
def dynamodb_pair(tmp_path_factory: pytest.TempPathFactory,
                  moto_endpoint: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two servers on one DynamoDB table, each with its own data directory."""
    root = tmp_path_factory.mktemp("stateless")
    shared = {
        "LAKEFS_DATABASE_TYPE": "dynamodb",
        "LAKEFS_DATABASE_DYNAMODB_TABLE_NAME": f"stateless-{os.getpid()}-{uuid.uuid4().hex}",
        "LAKEFS_DATABASE_DYNAMODB_ENDPOINT": moto_endpoint,
        "LAKEFS_DATABASE_DYNAMODB_AWS_REGION": MOTO_ENV["AWS_DEFAULT_REGION"],
        "LAKEFS_DATABASE_DYNAMODB_AWS_ACCESS_KEY_ID": MOTO_ENV["AWS_ACCESS_KEY_ID"],
        "LAKEFS_DATABASE_DYNAMODB_AWS_SECRET_ACCESS_KEY": MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
        "LAKEFS_BLOCKSTORE_TYPE": "local",
        "LAKEFS_BLOCKSTORE_LOCAL_PATH": str(root / "store"),
        "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "a shared secret for both servers",
    }
    with live_server(str(root / "one"), shared) as one, \
            live_server(str(root / "two"), shared) as two:
        yield one, two


def test_users_and_keys_are_shared_through_the_dynamodb_table(
        dynamodb_pair: tuple[LiveServer, LiveServer]) -> None:
    """A user and key made through one process authenticate on the other, and a key
    deleted through one is refused by the other at once; no SQLite file is involved."""
    one, two = dynamodb_pair
    with one.client() as admin_one, two.client() as admin_two:
        assert admin_one.post("/auth/users", json={"id": "carol"}).status_code == 201
        assert admin_one.put("/auth/groups/Viewers/members/carol").status_code == 201
        made = admin_one.post("/auth/users/carol/credentials")
        assert made.status_code == 201, made.text
        key, secret = made.json()["access_key_id"], made.json()["secret_access_key"]
        with two.client(key, secret) as carol_two, one.client(key, secret) as carol_one:
            me = carol_two.get("/user")
            assert me.status_code == 200 and me.json()["user"]["id"] == "carol"
            assert carol_two.get("/repositories").status_code == 200  # Viewers may list
            assert carol_two.post("/repositories", json={
                "name": "nope", "storage_namespace": "local://nope"}).status_code == 403
            # the other way round: deleted through two, refused by one
            assert admin_two.delete(f"/auth/users/carol/credentials/{key}").status_code == 204
            assert carol_one.get("/user").status_code == 401
            assert carol_two.get("/user").status_code == 401
        listed = admin_two.get("/auth/users").json()["results"]
        assert [u["id"] for u in listed] == ["admin", "carol"]
        assert admin_two.delete("/auth/users/carol").status_code == 204
        assert admin_one.get("/auth/users/carol").status_code == 404
    for server in (one, two):
        assert server.services.config.database.type == "dynamodb"
    data_dirs = [Path(s.services.config.data_dir) for s in (one, two)]
    assert data_dirs[0] != data_dirs[1]
    assert sqlite_files(*data_dirs) == []


def test_branch_compare_and_swap_holds_across_servers_on_dynamodb(
        dynamodb_pair: tuple[LiveServer, LiveServer]) -> None:
    """Concurrent commits to one branch through two processes: none is lost, and of
    concurrent creations of one branch name exactly one wins."""
    one, two = dynamodb_pair
    clients = [one.client(), two.client()]
    try:
        assert clients[0].post("/repositories", json={
            "name": "cas", "storage_namespace": "local://cas"}).status_code == 201

        def create(i: int) -> int:
            return clients[i % 2].post("/repositories/cas/branches", json={
                "name": "contested", "source": "main"}).status_code

        with ThreadPoolExecutor(6) as pool:
            statuses = sorted(pool.map(create, range(6)))
        assert statuses == [201, 409, 409, 409, 409, 409]

        def commit(i: int) -> str:
            http = clients[i % 2]
            for _attempt in range(50):  # a commit that loses the race is retried
                put = http.post("/repositories/cas/branches/main/objects",
                                params={"path": f"f{i}"}, files={"content": b"x"})
                assert put.status_code == 201, put.text
                made = http.post("/repositories/cas/branches/main/commits",
                                 json={"message": f"c{i}"})
                if made.status_code == 201:
                    return str(made.json()["id"])
                assert made.status_code in (400, 409, 412), made.text
            raise AssertionError("a commit never landed")

        with ThreadPoolExecutor(6) as pool:
            ids = list(pool.map(commit, range(6)))
        log = clients[1].get("/repositories/cas/refs/main/commits",
                             params={"amount": 100}).json()["results"]
        logged = {c["id"] for c in log}
        assert set(ids) <= logged  # every acknowledged commit is on the branch
        listed = clients[0].get("/repositories/cas/refs/main/objects/ls").json()
        assert {o["path"] for o in listed["results"]} == {f"f{i}" for i in range(6)}
    finally:
        for c in clients:
            c.close()
