"""The source client refuses commit records that do not hash to their ids.

A real server answers; between it and the client sits a loopback proxy that alters
commit records on the way (a corrupting middlebox, or a forged answer).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer, live_server
from replication.source import CommitIntegrityError, SourceClient, commit_from_json

Alter = Callable[[dict[str, Any]], None]


@contextlib.contextmanager
def altering_proxy(upstream: str, alter: Alter) -> Iterator[str]:
    """A loopback HTTP proxy to ``upstream`` that passes every commit record in a JSON
    answer (an object with ``id`` and ``meta_range_id``) through ``alter``."""

    def tamper(body: Any) -> None:
        if isinstance(body, dict):
            if "id" in body and "meta_range_id" in body:
                alter(body)
            for value in body.values():
                tamper(value)
        elif isinstance(body, list):
            for value in body:
                tamper(value)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            headers = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}
            resp = httpx.get(upstream + self.path, headers=headers, timeout=30)
            content = resp.content
            if resp.headers.get("content-type", "").startswith("application/json"):
                body = resp.json()
                tamper(body)
                content = json.dumps(body).encode()
            self.send_response(resp.status_code)
            self.send_header("Content-Type", resp.headers.get("content-type", "text/plain"))
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    """A server with repository ``src`` and two commits on main; yields the head."""
    with live_server(str(tmp_path_factory.mktemp("source"))) as srv, srv.client() as c:
        r = c.post("/repositories", json={"name": "src", "storage_namespace": "local://src"})
        assert r.status_code == 201, r.text
        head = ""
        for n in range(2):
            r = c.post("/repositories/src/branches/main/objects", params={"path": f"f{n}"},
                       content=f"data {n}".encode())
            assert r.status_code == 201, r.text
            r = c.post("/repositories/src/branches/main/commits",
                       json={"message": f"commit {n}", "metadata": {"n": str(n)}})
            assert r.status_code == 201, r.text
            head = r.json()["id"]
        yield srv, head


def _set(field: str, value: Any) -> Alter:
    def alter(record: dict[str, Any]) -> None:
        record[field] = value
    return alter


ALTERATIONS = {
    "message": _set("message", "a different message"),
    "committer": _set("committer", "mallory"),
    "metarange": _set("meta_range_id", "0" * 64),
    "creation_date": lambda r: r.update(creation_date=r["creation_date"] + 1),
    "metadata": lambda r: r.update(metadata={**r["metadata"], "extra": "1"}),
    "parents": lambda r: r.update(parents=list(reversed(r["parents"])) + ["0" * 64]),
}


def test_genuine_records_are_accepted(source: tuple[LiveServer, str]) -> None:
    srv, head = source
    client = SourceClient(srv.endpoint, ADMIN_KEY, ADMIN_SECRET)
    try:
        record = client.get_commit("src", head)
        assert record.id == head and record.commit.message == "commit 1"
        chain = client.new_commits("src", head, known=lambda _c: False)
        assert [c.id for c in chain][-1] == head and len(chain) == 3
        # the log walk stops at what is known
        assert [c.id for c in client.new_commits("src", head, known=lambda c: c != head)] \
            == [head]
    finally:
        client.close()


@pytest.mark.parametrize("field", sorted(ALTERATIONS))
def test_altered_records_are_refused(source: tuple[LiveServer, str], field: str) -> None:
    srv, head = source
    with altering_proxy(srv.endpoint, ALTERATIONS[field]) as proxy:
        client = SourceClient(proxy, ADMIN_KEY, ADMIN_SECRET)
        try:
            # the proxy is transparent for everything but commit records
            assert client.get_repository("src")["id"] == "src"
            with pytest.raises(CommitIntegrityError, match=head):
                client.get_commit("src", head)
            with pytest.raises(CommitIntegrityError):
                client.new_commits("src", head, known=lambda _c: False)
        finally:
            client.close()


def test_commit_from_json_checks_every_hashed_field(source: tuple[LiveServer, str]) -> None:
    srv, head = source
    with srv.client() as c:
        genuine = c.get(f"/repositories/src/commits/{head}").json()
    assert commit_from_json(dict(genuine)).id == head
    # the generation is not part of the id: changing it is not an alteration
    assert commit_from_json({**genuine, "generation": 99}).id == head
    for field, alter in ALTERATIONS.items():
        record = json.loads(json.dumps(genuine))
        alter(record)
        with pytest.raises(CommitIntegrityError):
            commit_from_json(record)
        assert record != genuine, field
    with pytest.raises(CommitIntegrityError):
        commit_from_json({**genuine, "id": "f" * 64})
