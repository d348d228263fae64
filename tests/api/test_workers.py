"""Several worker processes on one socket (``run --workers 2``): every worker answers the
same branch heads, concurrent commits through both lose nothing, and a revocation made
through one worker is refused by every worker at once, by the API and the S3 gateway.

Each request goes to a known worker: a connection stays with the worker that accepted
it, and at DEBUG level every response names its worker (``x-lakefs-worker``).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lakefs_core.server import WORKER_HEADER
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, ServerProcess, server_process
from lakefs_testing.servers import PostgresServer

WORKERS = 2


class WorkerConnection:
    """Requests to one worker process, over a connection it accepted.

    The server closes an idle connection after a few seconds; a new one may land on
    another worker, so before each request a health probe checks the worker and
    reconnects until the right one answers.
    """

    def __init__(self, server: ServerProcess, conn: http.client.HTTPConnection, pid: str) -> None:
        self.server = server
        self.conn = conn
        self.pid = pid

    def _probe(self) -> str:
        try:
            self.conn.request("GET", "/_health")
            response = self.conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            return ""
        return response.getheader(WORKER_HEADER) or ""

    def _ensure(self) -> None:
        deadline = time.monotonic() + 60
        while self._probe() != self.pid:
            assert time.monotonic() < deadline, f"worker {self.pid} no longer answers"
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)

    def request(self, method: str, path: str, *, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        self._ensure()
        self.conn.request(method, path, body=body, headers=headers or {})
        response = self.conn.getresponse()
        data = response.read()
        assert response.getheader(WORKER_HEADER) == self.pid
        return response.status, data

    def api(self, method: str, path: str, *, json_body: Any = None, body: bytes | None = None,
            key: str = ADMIN_KEY, secret: str = ADMIN_SECRET,
            query: dict[str, str] | None = None) -> tuple[int, Any]:
        """A REST API call with basic auth; the parsed JSON answer (or the raw bytes)."""
        basic = base64.b64encode(f"{key}:{secret}".encode()).decode()
        headers = {"authorization": f"Basic {basic}"}
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["content-type"] = "application/json"
        elif body is not None:
            headers["content-type"] = "application/octet-stream"
        url = f"/api/v1{path}" + (f"?{urlencode(query)}" if query else "")
        status, data = self.request(method, url, body=body, headers=headers)
        with contextlib.suppress(ValueError):
            return status, json.loads(data)
        return status, data

    def s3(self, method: str, path: str, key: str, secret: str) -> tuple[int, bytes]:
        """A SigV4-signed S3 gateway request (no body)."""
        signed = AWSRequest(method=method, url=f"{self.server.endpoint}{path}")
        S3SigV4Auth(Credentials(key, secret), "s3", "us-east-1").add_auth(signed)
        return self.request(method, path, headers=dict(signed.headers.items()))


def _connect(server: ServerProcess, per_worker: int) -> list[list[WorkerConnection]]:
    """``per_worker`` connections to each of the server's workers."""
    pinned: dict[str, list[WorkerConnection]] = {}
    spare: list[http.client.HTTPConnection] = []
    deadline = time.monotonic() + 60
    while len(pinned) < WORKERS or any(len(c) < per_worker for c in pinned.values()):
        assert time.monotonic() < deadline, f"workers reached: {list(pinned)}"
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        probe = WorkerConnection(server, conn, "")
        pid = probe._probe()
        assert pid, "no worker header: the server does not run at DEBUG level"
        if len(pinned.setdefault(pid, [])) < per_worker:
            pinned[pid].append(WorkerConnection(server, conn, pid))
        else:
            spare.append(conn)  # held open, so that the next connection goes elsewhere
            time.sleep(0.01)
    for conn in spare:
        conn.close()
    return list(pinned.values())


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def workers_server(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"LAKEFS_LOGGING_LEVEL": "DEBUG", "LAKEFS_AUTH_CACHE_TTL": "1h",
           "LAKEFS_REPLICATION_ENDPOINT": "http://127.0.0.1:9"}
    if request.param == "postgres":
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        url = postgres.create_database(f"workers_{int(time.time() * 1000)}")
        env.update({"LAKEFS_DATABASE_TYPE": "postgres",
                    "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING":
                        url.replace("postgresql+psycopg://", "postgres://"),
                    "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "workers-test-key"})
    root: Path = tmp_path_factory.mktemp(f"workers-{request.param}")
    with server_process(root / "data", env, workers=WORKERS) as server:
        yield server


@pytest.fixture
def connect(workers_server: ServerProcess
            ) -> Iterator[Callable[[int], list[list[WorkerConnection]]]]:
    """Opens ``per_worker`` connections to each worker; closes them after the test."""
    opened: list[WorkerConnection] = []

    def connect_(per_worker: int) -> list[list[WorkerConnection]]:
        workers = _connect(workers_server, per_worker)
        opened.extend(c for worker in workers for c in worker)
        return workers

    yield connect_
    for conn in opened:
        conn.conn.close()


def _create_repository(conn: WorkerConnection, name: str) -> None:
    status, body = conn.api("POST", "/repositories", json_body={
        "name": name, "storage_namespace": f"local://{name}", "default_branch": "main"})
    assert status == 201, body


def test_every_worker_reads_the_branch_head_just_committed(
        connect: Callable[[int], list[list[WorkerConnection]]]) -> None:
    first, second = (c[0] for c in connect(1))
    _create_repository(first, "heads")
    for i in range(8):
        writer, reader = (first, second) if i % 2 == 0 else (second, first)
        status, body = writer.api("POST", "/repositories/heads/branches/main/objects",
                                  query={"path": f"f{i}"}, body=f"v{i}".encode())
        assert status == 201, body
        status, commit = writer.api("POST", "/repositories/heads/branches/main/commits",
                                    json_body={"message": f"c{i}"})
        assert status == 201, commit
        for conn in (reader, writer):
            status, branch = conn.api("GET", "/repositories/heads/branches/main")
            assert (status, branch["commit_id"]) == (200, commit["id"])
            status, data = conn.api("GET", "/repositories/heads/refs/main/objects",
                                    query={"path": f"f{i}"})
            assert (status, data) == (200, f"v{i}".encode())


def test_concurrent_commits_through_every_worker_lose_no_update(
        connect: Callable[[int], list[list[WorkerConnection]]]) -> None:
    conns = [c for worker in connect(3) for c in worker]
    _create_repository(conns[0], "race")
    rounds = 4

    def writer(index: int) -> list[str]:
        conn, committed = conns[index], []
        for j in range(rounds):
            status, body = conn.api("POST", "/repositories/race/branches/main/objects",
                                    query={"path": f"w{index}/{j}"}, body=b"x")
            assert status == 201, body
            status, body = conn.api("POST", "/repositories/race/branches/main/commits",
                                    json_body={"message": f"w{index}/{j}"})
            # a concurrent commit may have taken this writer's object already
            assert status == 201 or (status == 400 and "no changes" in body["message"]), body
            if status == 201:
                committed.append(body["id"])
        return committed

    with ThreadPoolExecutor(len(conns)) as pool:
        committed = [c for ids in pool.map(writer, range(len(conns))) for c in ids]

    status, log = conns[0].api("GET", "/repositories/race/refs/main/commits",
                               query={"amount": "1000"})
    assert status == 200
    history = [c["id"] for c in log["results"]]
    # every commit that was answered 201 is on the branch, and nothing else was added
    assert sorted(history[:-1]) == sorted(committed)
    status, listing = conns[0].api("GET", "/repositories/race/refs/main/objects/ls",
                                   query={"amount": "1000"})
    assert status == 200
    assert sorted(o["path"] for o in listing["results"]) == sorted(
        f"w{i}/{j}" for i in range(len(conns)) for j in range(rounds))


def test_a_revocation_through_one_worker_holds_on_every_worker(
        connect: Callable[[int], list[list[WorkerConnection]]]) -> None:
    """Each worker caches keys and policies (for ``auth.cache.ttl``, an hour here), yet
    every revocation made through one worker is refused by the next request to any
    worker, on the REST API's object reads and writes and on the S3 gateway."""
    workers = [c[0] for c in connect(1)]
    admin = workers[0]
    _create_repository(admin, "revoked")
    assert admin.api("POST", "/repositories/revoked/branches/main/objects",
                     body=b"data", query={"path": "seen"})[0] == 201
    assert admin.api("POST", "/auth/users", json_body={"id": "alice"})[0] == 201
    assert admin.api("POST", "/auth/groups", json_body={"id": "writers"})[0] == 201
    assert admin.api("PUT", "/auth/groups/writers/policies/FSFullAccess")[0] == 201
    status, cred = admin.api("POST", "/auth/users/alice/credentials")
    assert status == 201, cred
    key, secret = cred["access_key_id"], cred["secret_access_key"]

    def statuses(conn: WorkerConnection) -> tuple[int, int, int, int, int]:
        """stat, read, upload, repository read (API) and object read (S3) as alice."""
        objects = "/repositories/revoked/refs/main/objects"
        return (conn.api("GET", f"{objects}/stat", key=key, secret=secret,
                         query={"path": "seen"})[0],
                conn.api("GET", objects, key=key, secret=secret, query={"path": "seen"})[0],
                conn.api("POST", "/repositories/revoked/branches/main/objects", key=key,
                         secret=secret, body=b"x", query={"path": "alice"})[0],
                conn.api("GET", "/repositories/revoked", key=key, secret=secret)[0],
                conn.s3("GET", "/revoked/main/seen", key, secret)[0])

    allowed = (200, 200, 201, 200, 200)
    forbidden = (403, 403, 403, 403, 403)
    # every door of every worker lets alice in while she is in the group or has the
    # policy herself (and each worker has cached her key and policies)
    assert [statuses(c) for c in workers] == [forbidden] * WORKERS
    assert workers[-1].api("PUT", "/auth/groups/writers/members/alice")[0] == 201
    assert [statuses(c) for c in workers] == [allowed] * WORKERS
    assert workers[-1].api("PUT", "/auth/users/alice/policies/FSFullAccess")[0] == 201
    assert [statuses(c) for c in workers] == [allowed] * WORKERS

    # the policy detached from her through the last worker: the group's still holds
    assert workers[-1].api("DELETE", "/auth/users/alice/policies/FSFullAccess")[0] == 204
    assert [statuses(c) for c in workers] == [allowed] * WORKERS
    # the group's policy detached through the first
    assert admin.api("DELETE", "/auth/groups/writers/policies/FSFullAccess")[0] == 204
    assert [statuses(c) for c in workers] == [forbidden] * WORKERS
    # attached again, then alice taken out of the group
    assert admin.api("PUT", "/auth/groups/writers/policies/FSFullAccess")[0] == 201
    assert [statuses(c) for c in workers] == [allowed] * WORKERS
    assert workers[-1].api("DELETE", "/auth/groups/writers/members/alice")[0] == 204
    assert [statuses(c) for c in workers] == [forbidden] * WORKERS

    # her key deleted through the first worker: no door knows it any more
    assert admin.api("PUT", "/auth/users/alice/policies/FSFullAccess")[0] == 201
    assert [statuses(c) for c in workers] == [allowed] * WORKERS
    status, body = admin.api("DELETE", f"/auth/users/alice/credentials/{key}")
    assert status == 204, body
    assert [statuses(c)[:4] for c in workers] == [(401, 401, 401, 401)] * WORKERS
    refusals = [c.s3("GET", "/revoked/main/seen", key, secret) for c in workers]
    assert [status for status, _ in refusals] == [403] * WORKERS
    assert all(b"InvalidAccessKeyId" in body for _, body in refusals)

    # a new key, then the user deleted through the last worker
    status, cred = admin.api("POST", "/auth/users/alice/credentials")
    assert status == 201, cred
    key, secret = cred["access_key_id"], cred["secret_access_key"]
    assert [statuses(c) for c in workers] == [allowed] * WORKERS
    assert workers[-1].api("DELETE", "/auth/users/alice")[0] == 204
    assert [statuses(c)[:4] for c in workers] == [(401, 401, 401, 401)] * WORKERS
    assert [c.s3("GET", "/revoked/main/seen", key, secret)[0] for c in workers] == (
        [403] * WORKERS)
