"""How the servers (the lakeFS server, the replication service) take HTTP off the wire.

A request's head (request line and headers) is bounded before it is parsed: the
parser gathers a header's pieces by concatenation, so an endless header costs time
quadratic in its length, and memory, before any authentication. Past
:data:`MAX_REQUEST_HEAD` bytes (or the configured bound) the connection is answered
``431 Request Header Fields Too Large`` and closed.

A request that asks for ``Expect: 100-continue`` and declares no body gets its
``100 Continue`` as soon as it is started. uvicorn sends it when the application
first reads the body, and an empty body may never be read: the final answer would
then come without it, which leaves some clients' pooled connections (botocore's, so
the AWS CLI's and boto3's) out of step for their next request.

What a connection writes within one turn of the event loop goes out in one send
(:class:`CorkedTransport`): uvicorn writes an answer's head and its body apart, and each
write on its own was a system call and a TCP segment, which the client woke up for.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from lakefs_core.protocol.bodies import has_body

#: the largest request head (request line and headers) either server reads by default
MAX_REQUEST_HEAD = 64 << 10

_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
              b"content-type: text/plain; charset=utf-8\r\n"
              b"connection: close\r\n")


#: buffered writes are sent at once from this size on, and a write this large is not
#: copied into a buffer
CORK_LIMIT = 64 << 10


class CorkedTransport:
    """A connection's transport whose writes are held until the end of the event loop's
    turn, then sent together (or at once past :data:`CORK_LIMIT` bytes).

    Closing sends what is held first; aborting drops it. Everything else is the
    transport's own.
    """

    __slots__ = ("_held", "_loop", "_size", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        if len(data) >= CORK_LIMIT:
            self.flush()
            self._transport.write(data)
            return
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)
        self._size += len(data)
        if self._size >= CORK_LIMIT:
            self.flush()

    def flush(self) -> None:
        """Send what is held."""
        held = self._held
        if not held:
            return
        self._held, self._size = [], 0
        if not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held, self._size = [], 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._size

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a request head longer than the bound.

    The bound is uvicorn's ``h11_max_incomplete_event_size`` (so that one setting
    bounds both of uvicorn's parsers, and the class needs no state to reach a worker
    process). Bytes are counted from the end of one request's body to the end of the
    next one's headers, and handed to the parser at most one byte past the bound.
    """

    _in_head = True
    _head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # the flow control above stays on the transport itself
        self.transport = CorkedTransport(transport, self.loop)  # type: ignore[assignment]

    def _limit(self) -> int:
        return self.config.h11_max_incomplete_event_size or MAX_REQUEST_HEAD

    def data_received(self, data: bytes) -> None:
        limit = self._limit()
        while data and self._in_head:
            piece, data = data[:limit + 1 - self._head_bytes], data[limit + 1 - self._head_bytes:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return
            if self._in_head and self._head_bytes > limit:
                self._refuse(limit)
                return
        if data:
            super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head, self._head_bytes = True, 0
        super().on_message_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # pipelined requests start here in turn too, so the interim answer stays in order
        if cycle.waiting_for_100_continue and not has_body(cycle.scope["headers"]):
            cycle.waiting_for_100_continue = False
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        super()._start_asgi_task(cycle, app)

    def _refuse(self, limit: int) -> None:
        message = f"request headers of at most {limit} bytes".encode()
        self.transport.write(_TOO_LARGE + b"content-length: " + str(len(message)).encode()
                             + b"\r\n\r\n" + message)
        self.transport.close()


def uvicorn_http_options(max_request_head: int = MAX_REQUEST_HEAD) -> dict[str, Any]:
    """uvicorn's settings for a server that bounds request heads at ``max_request_head``."""
    return {"http": BoundedHeadProtocol, "h11_max_incomplete_event_size": max_request_head}
