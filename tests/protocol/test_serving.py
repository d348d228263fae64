"""A connection's writes within one turn of the event loop go out together."""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path

from lakefs_core.protocol.serving import CORK_LIMIT, CorkedTransport
from lakefs_testing.live_server import live_server


class _Recorder(asyncio.Transport):
    """Records what reaches the socket (a stand-in for the event loop's transport)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 7


def test_writes_of_one_turn_are_sent_together() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], list[bytes], int]:
        raw = _Recorder()
        corked = CorkedTransport(raw, asyncio.get_running_loop())
        corked.write(b"HTTP/1.1 200 OK\r\n\r\n")
        corked.write(b"")
        corked.write(b"body")
        during = list(raw.sent)  # nothing sent within the turn
        size = corked.get_write_buffer_size()
        await asyncio.sleep(0)
        after_turn = list(raw.sent)
        corked.write(b"head")
        corked.write(b"x" * CORK_LIMIT)  # large: sent at once, after what was held
        large = list(raw.sent[len(after_turn):])
        return during, after_turn, large, size

    during, after_turn, large, size = asyncio.run(scenario())
    assert during == []
    assert size == 7 + len(b"HTTP/1.1 200 OK\r\n\r\nbody")
    assert after_turn == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    assert large == [b"head", b"x" * CORK_LIMIT]


def test_close_sends_what_is_held_and_abort_drops_it() -> None:
    async def scenario() -> tuple[_Recorder, _Recorder]:
        loop = asyncio.get_running_loop()
        closed, aborted = _Recorder(), _Recorder()
        for raw in (closed, aborted):
            corked = CorkedTransport(raw, loop)
            corked.write(b"answer")
            corked.close() if raw is closed else corked.abort()
        await asyncio.sleep(0)  # the turn's flush finds nothing left to send
        return closed, aborted

    closed, aborted = asyncio.run(scenario())
    assert closed.sent == [b"answer"] and closed.closed
    assert aborted.sent == [] and aborted.aborted


def test_pipelined_requests_are_answered_in_order_on_one_connection(tmp_path: Path) -> None:
    """Three requests sent in one piece: three answers, in order, on the live server."""
    with live_server(str(tmp_path / "srv")) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=15)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.sendall(b"".join(
                f"GET {p} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                for p in ("/_health", "/api/v1/healthcheck", "/api/v1/repositories")))
            statuses = []
            for _ in range(3):
                response = http.client.HTTPResponse(conn.sock, method="GET")
                response.begin()
                response.read()
                statuses.append(response.status)
        finally:
            conn.close()
    assert statuses == [204, 204, 401]  # the last: no credentials
