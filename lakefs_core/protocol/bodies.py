"""Request bodies as an ASGI server hands them over: bounded in time and in size.

Every front door reads bodies through :class:`BodyReader`:

- **time**: each piece of :data:`PIECE_SIZE` bytes (or the end of the body) must arrive
  within the timeout, else :class:`~lakefs_core.errors.RequestTimeoutError`. A sender
  that stops, or trickles a few bytes now and then, is cut off instead of holding the
  connection and whatever waits on it;
- **size**: :meth:`BodyReader.read_all` refuses a body past its limit with
  :class:`~lakefs_core.errors.PayloadTooLargeError`;
- **text**: :func:`check_json_text` refuses a JSON body whose strings are no valid
  text (a lone surrogate escape such as ``\\ud800`` parses, but cannot be stored);
- **threads**: a worker thread pulls pieces with :meth:`BodyReader.pull`, which waits on
  the event loop; :meth:`BodyReader.prefetch` gathers the first piece before any thread
  is taken, so a slow sender costs no thread until it has sent a whole piece.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import anyio
import anyio.from_thread

from lakefs_core.errors import (
    IncompleteBodyError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ValidationError,
)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

#: the amount of body that must arrive within one timeout
PIECE_SIZE = 1 << 20

#: a JSON escape of a UTF-16 surrogate (paired or not): the only way to put one in JSON
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

TIMEOUT_MESSAGE = ("Your socket connection to the server was not read from or written to "
                   "within the timeout period. Idle connections will be closed.")


def header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower-case) among ASGI header pairs."""
    for key, value in headers:
        if key == name:
            return value
    return None


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length a request declares (None when absent or unreadable)."""
    value = header(headers, b"content-length")
    if value is None:
        return None
    try:
        length = int(value.strip())
    except ValueError:
        return None
    return length if length >= 0 else None


def has_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request announces a body (chunked, or a non-zero Content-Length)."""
    pairs = list(headers)
    if header(pairs, b"transfer-encoding") is not None:
        return True
    value = header(pairs, b"content-length")
    return value is not None and value.strip() not in (b"", b"0")


class BodyReader:
    """One request's body, read from the event loop under a deadline per piece.

    Args:
        receive: The ASGI receive callable of the request.
        timeout: Seconds within which each :data:`PIECE_SIZE` bytes (or the end) must
            arrive.
        expect_body: Whether the request announced a body; when False the body is
            taken as empty without waiting for it.
        piece_size: The amount of body one timeout covers.
    """

    def __init__(self, receive: Receive, *, timeout: float, expect_body: bool = True,
                 piece_size: int = PIECE_SIZE) -> None:
        self._receive = receive
        self._timeout = timeout
        self._piece_size = piece_size
        self._piece_received = 0
        self._deadline: float | None = None
        self._ready: tuple[bytes, bool] | None = None
        #: whether some of the body has not been read yet
        self.more = expect_body

    async def receive(self) -> Message:
        """The next ASGI message, as ``receive`` would return it, within the deadline.

        Raises:
            RequestTimeoutError: The current piece did not arrive in time.
        """
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self._timeout
        try:  # asyncio's own deadline: the servers run on asyncio, and it costs half
            async with asyncio.timeout(max(self._deadline - now, 0.0)):  # of anyio's
                message = await self._receive()
        except TimeoutError:
            raise RequestTimeoutError(TIMEOUT_MESSAGE) from None
        if message["type"] == "http.request":
            self._piece_received += len(message.get("body", b""))
            if self._piece_received >= self._piece_size:
                self._piece_received = 0
                self._deadline = None  # the next piece gets a timeout of its own
            if not message.get("more_body", False):
                self.more = False
        return message

    async def next_piece(self) -> tuple[bytes, bool]:
        """Up to :data:`PIECE_SIZE` bytes of the body, and whether more follow.

        Raises:
            RequestTimeoutError: The piece did not arrive in time.
            IncompleteBodyError: The client disconnected before the body ended.
        """
        if self._ready is not None:
            ready, self._ready = self._ready, None
            return ready
        if not self.more:
            return b"", False
        parts: list[bytes] = []
        size = 0
        while self.more and size < self._piece_size:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                self.more = False
                raise IncompleteBodyError("the client disconnected before the body ended")
            parts.append(message.get("body", b""))
            size += len(parts[-1])
        return b"".join(parts), self.more

    async def prefetch(self) -> None:
        """Gather the first piece now (on the event loop), before any thread waits on it."""
        if self._ready is None and self.more:
            self._ready = await self.next_piece()

    def pull(self) -> tuple[bytes, bool]:
        """:meth:`next_piece`, called from a worker thread of the running event loop."""
        if self._ready is not None:
            ready, self._ready = self._ready, None
            return ready
        if not self.more:
            return b"", False
        return anyio.from_thread.run(self.next_piece)

    async def read_all(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes.

        Raises:
            PayloadTooLargeError: The body is larger than ``limit``.
            RequestTimeoutError, IncompleteBodyError: As :meth:`next_piece`.
        """
        parts: list[bytes] = []
        size = 0
        more = True
        while more:
            chunk, more = await self.next_piece()
            size += len(chunk)
            if size > limit:
                raise PayloadTooLargeError(too_large_message(limit))
            parts.append(chunk)
        return b"".join(parts)


def too_large_message(limit: int) -> str:
    """The message of a refused body larger than ``limit`` bytes."""
    if limit % (1 << 20) == 0:
        size = f"{limit >> 20} MiB"
    elif limit % 1024 == 0:
        size = f"{limit >> 10} KiB"
    else:
        size = f"{limit} bytes"
    return f"request body too large: the limit is {size}"



def is_json(content_type: bytes | None) -> bool:
    """Whether a Content-Type names JSON (``application/json``, ``application/x+json``)."""
    media = (content_type or b"").split(b";", 1)[0].strip().lower()
    return media == b"application/json" or media.endswith(b"+json")


def check_json_text(body: bytes) -> None:
    """Refuse a JSON document with a string (or key) that is no valid text.

    JSON may escape a lone UTF-16 surrogate (``"\\ud800"``); the parsed string then
    cannot be encoded, stored or hashed. A body that is not JSON at all is left to the
    route, which says what it expected.

    Raises:
        ValidationError: a string of the document holds a lone surrogate.
    """
    if not _SURROGATE_ESCAPE.search(body):
        return  # the cheap common case: no surrogate escape at all
    try:
        document = json.loads(body)
    except ValueError:
        return
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValidationError(
                    f"invalid JSON body: {value!r} holds a lone surrogate, which is no "
                    "valid text") from None
