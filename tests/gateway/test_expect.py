"""``Expect: 100-continue``: the interim answer always comes before the final one.

botocore sends every PUT with ``Expect: 100-continue``. When the final answer to an
empty PUT came without ``100 Continue``, its pooled connection was left out of step
and the next request on it (an UploadPart of the AWS CLI) lost its headers.
"""

from __future__ import annotations

import hashlib
import socket

from lakefs_testing.live_server import LiveServer
from tests.gateway.conftest import Repo, sign_headers


def _exchange(server: LiveServer, request: bytes, answers: int) -> bytes:
    """Send ``request`` on one connection; read until ``answers`` final answers came."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while received.count(b"HTTP/1.1 2") < answers:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
    return received


def _signed_put(server: LiveServer, path: str, body: bytes) -> bytes:
    headers = sign_headers(server, "PUT", path, {"Expect": "100-continue",
                                                 "Content-Length": str(len(body))},
                           hashlib.sha256(body).hexdigest(), body)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"PUT {path} HTTP/1.1\r\n{head}\r\n".encode() + body


def test_empty_put_gets_100_continue_first(repo: Repo) -> None:
    path = f"/{repo.name}/main/empty"
    received = _exchange(repo.server, _signed_put(repo.server, path, b""), answers=1)
    assert received.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "), received[:200]
    assert repo.read("main", "empty") == b""


def test_pipelined_empty_puts_keep_their_order(repo: Repo) -> None:
    first = _signed_put(repo.server, f"/{repo.name}/main/one", b"")
    second = _signed_put(repo.server, f"/{repo.name}/main/two", b"")
    received = _exchange(repo.server, first + second, answers=2)
    statuses = [line.split(b" ")[1] for line in received.split(b"\r\n")
                if line.startswith(b"HTTP/1.1 ")]
    assert statuses == [b"100", b"200", b"100", b"200"], received
