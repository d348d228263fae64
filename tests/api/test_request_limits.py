"""What a request body may cost the server: who may send one, how large, how slow.

Every test speaks raw HTTP where a client library would not misbehave on purpose: a
body announced and never sent, one sent a few bytes at a time, one far too large.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from lakefs_core.errors import ObjectNotFoundError
from lakefs_testing.live_server import (
    ADMIN_KEY,
    ADMIN_SECRET,
    LiveServer,
    live_server,
    server_process,
)
from lakefs_testing.servers import send_long_header
from tests.gateway.conftest import s3_client

ADMIN_AUTH = "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode()


@contextlib.contextmanager
def _server(tmp_path: Path, **env: str) -> Iterator[LiveServer]:
    with live_server(str(tmp_path / "srv"), {f"LAKEFS_HTTP_{k.upper()}": v
                                             for k, v in env.items()}) as srv:
        yield srv


def _send(srv: LiveServer, method: str, path: str, headers: dict[str, str],
          body: bytes = b"", timeout: float = 15) -> tuple[int, dict[str, str], bytes]:
    """Send the headers and ``body`` (which may be shorter than announced); the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        if body:
            conn.send(body)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, \
            response.read()
    finally:
        conn.close()


def test_a_large_body_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with _server(tmp_path) as srv:
        # login needs no authentication: its body is small or refused
        status, headers, body = _send(srv, "POST", "/api/v1/auth/login", {
            "Content-Type": "application/json", "Content-Length": str(50 << 20)})
        assert status == 413 and "too large" in json.loads(body)["message"]
        assert headers.get("connection") == "close"
        # any other JSON route takes up to http.max_request_body (8 MiB by default)
        status, _, body = _send(srv, "POST", "/api/v1/repositories", {
            "Authorization": ADMIN_AUTH, "Content-Type": "application/json",
            "Content-Length": str(2 << 30)}, b"{}")
        assert status == 413 and json.loads(body)["message"] == \
            "request body too large: the limit is 8 MiB"


def test_a_chunked_body_is_cut_at_the_limit(tmp_path: Path) -> None:
    with _server(tmp_path, max_request_body="4096") as srv:
        chunks = [b'{"name": "rrr", "storage_namespace": "local://rrr", "x": "',
                  b"y" * 8000, b'"}']
        response = httpx.post(f"{srv.api}/repositories", content=iter(chunks),
                              auth=(ADMIN_KEY, ADMIN_SECRET),
                              headers={"Content-Type": "application/json"})
        assert response.status_code == 413
        assert response.json()["message"] == "request body too large: the limit is 4 KiB"
        with srv.client() as client:  # nothing was created
            assert client.get("/repositories/rrr").status_code == 404
            ok = client.post("/repositories", json={"name": "rrr",
                                                    "storage_namespace": "local://rrr"})
            assert ok.status_code == 201, ok.text


def test_the_sender_is_authenticated_before_the_body_is_read(tmp_path: Path) -> None:
    with _server(tmp_path) as srv:
        # a stranger announcing 1 MiB and sending nothing is answered on its headers
        status, headers, body = _send(srv, "POST", "/api/v1/repositories", {
            "Authorization": "Basic " + base64.b64encode(b"AKIANOBODY:nothing").decode(),
            "Content-Type": "application/json", "Content-Length": str(1 << 20)}, timeout=10)
        assert status == 401 and headers.get("connection") == "close"
        assert json.loads(body)["message"]
        status, _, _ = _send(srv, "POST", "/api/v1/repositories/r/branches/main/objects?path=x",
                             {"Content-Type": "application/octet-stream",
                              "Content-Length": str(1 << 30)}, timeout=10)
        assert status == 401


def test_a_stalled_body_times_out(tmp_path: Path) -> None:
    with _server(tmp_path, request_body_timeout="1s") as srv:
        with srv.client() as client:
            assert client.post("/repositories", json={
                "name": "slow", "storage_namespace": "local://slow"}).status_code == 201
        # 2 GB announced, 7 bytes sent: the connection is not held
        status, headers, body = _send(srv, "POST", "/api/v1/repositories/slow/branches", {
            "Authorization": ADMIN_AUTH, "Content-Type": "application/json",
            "Content-Length": str(2 << 30)}, b'{"name"')
        assert status == 413  # too large to wait for at all
        status, headers, body = _send(srv, "POST", "/api/v1/repositories/slow/branches", {
            "Authorization": ADMIN_AUTH, "Content-Type": "application/json",
            "Content-Length": "100"}, b'{"name"')
        assert status == 408 and headers.get("connection") == "close"
        assert "timeout" in json.loads(body)["message"]
        # an object upload that stops half-way stores nothing
        status, headers, body = _send(
            srv, "POST", "/api/v1/repositories/slow/branches/main/objects?path=half.bin", {
                "Authorization": ADMIN_AUTH, "Content-Type": "application/octet-stream",
                "Content-Length": str(1 << 20)}, b"x" * 1000)
        assert status == 408, body
        with pytest.raises(ObjectNotFoundError):
            srv.services.catalog.read("slow", "main", "half.bin")
        with srv.client() as client:  # the server is fine
            assert client.get("/repositories/slow/branches").status_code == 200


def test_slow_senders_do_not_starve_the_api(tmp_path: Path) -> None:
    """Many clients trickling bodies through presigned S3 URLs and API uploads hold no
    thread that the API needs: health, reads, commits and S3 reads still answer."""
    sockets: list[socket.socket] = []
    with _server(tmp_path, request_body_timeout="60s") as srv:
        with srv.client() as client:
            assert client.post("/repositories", json={
                "name": "busy", "storage_namespace": "local://busy"}).status_code == 201
        s3 = s3_client(srv.endpoint, ADMIN_KEY, ADMIN_SECRET, signature_version="s3v4")
        s3.put_object(Bucket="busy", Key="main/small.txt", Body=b"small")
        try:
            for i in range(60):
                url = urlsplit(s3.generate_presigned_url(
                    "put_object", Params={"Bucket": "busy", "Key": f"main/slow-{i}"},
                    ExpiresIn=600))
                sockets.append(_trickle(srv, f"PUT {url.path}?{url.query}", {}))
            for i in range(60):
                sockets.append(_trickle(
                    srv, f"POST /api/v1/repositories/busy/branches/main/objects?path=up-{i}",
                    {"Authorization": ADMIN_AUTH,
                     "Content-Type": "application/octet-stream"}))
            with httpx.Client(timeout=15) as plain:
                assert plain.get(f"{srv.endpoint}/_health").status_code == 204
            with httpx.Client(base_url=srv.api, timeout=15,
                              auth=(ADMIN_KEY, ADMIN_SECRET)) as client:
                assert client.get("/repositories").status_code == 200
                put = client.post("/repositories/busy/branches/main/objects",
                                  params={"path": "fast.txt"}, content=b"fast")
                assert put.status_code == 201, put.text
                commit = client.post("/repositories/busy/branches/main/commits",
                                     json={"message": "while others trickle"})
                assert commit.status_code == 201, commit.text
            assert s3.get_object(Bucket="busy", Key="main/small.txt")["Body"].read() == \
                b"small"
        finally:
            for sock in sockets:
                sock.close()


def _trickle(srv: LiveServer, request_line: str, headers: dict[str, str]) -> socket.socket:
    """A connection that announced a 1 GB body and sent 10 bytes of it."""
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    head = [f"{request_line} HTTP/1.1", f"Host: 127.0.0.1:{srv.port}",
            f"Content-Length: {1 << 30}", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b"0123456789")
    return sock


def test_a_json_body_that_is_no_valid_text_is_400_and_changes_nothing(tmp_path: Path) -> None:
    """JSON may escape a lone surrogate ("\\ud800"): such a string can be neither stored nor
    hashed, so the body is refused, on routes with and without authentication."""
    surrogate = b'"t\\ud800"'
    with _server(tmp_path) as srv, srv.client() as api:
        assert api.post("/repositories", json={
            "name": "repo", "storage_namespace": "local://repo"}).status_code == 201
        for path, body in [
            ("/repositories/repo/tags", b'{"id": ' + surrogate + b', "ref": "main"}'),
            ("/auth/users", b'{"id": ' + surrogate + b'}'),
            ("/repositories/repo/branches/main/commits",
             b'{"message": "m", "metadata": {' + surrogate + b': "v"}}'),
            ("/auth/login", b'{"access_key_id": ' + surrogate + b', "secret_access_key": "s"}'),
        ]:
            for content_type in ({"content-type": "application/json"}, {}):
                r = api.post(path, content=body, headers=content_type)
                assert r.status_code == 400, (path, r.text)
                assert "lone surrogate" in r.json()["message"]
        assert api.get("/repositories/repo/tags").json()["results"] == []
        assert [u["id"] for u in api.get("/auth/users").json()["results"]] == ["admin"]
        # a surrogate pair is valid text (U+1F600), and so is an escaped backslash
        r = api.post("/repositories/repo/branches/main/commits", content=(
            b'{"message": "\\ud83d\\ude00 \\\\ud800", "allow_empty": true}'),
            headers={"content-type": "application/json"})
        assert r.status_code == 201, r.text
        assert r.json()["message"] == "\U0001F600 \\ud800"


def test_an_oversized_request_head_is_refused_and_the_server_still_answers(
        tmp_path: Path) -> None:
    with server_process(tmp_path / "srv",
                        {"LAKEFS_HTTP_MAX_REQUEST_HEAD": str(16 << 10)}) as srv:
        started = time.monotonic()
        answer = send_long_header(srv.port, 1 << 20)
        assert time.monotonic() - started < 10
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        # a head within the bound is served as ever
        assert send_long_header(srv.port, 8 << 10).startswith(b"HTTP/1.1 204 ")
        assert httpx.get(f"{srv.endpoint}/_health", timeout=10).status_code == 204
