"""The messages between the server and a Lua worker process, over its pipes.

A frame is a 4-byte big-endian length and that many bytes of JSON (an object with an
``op``). ``bytes`` values (Lua strings) travel as ``{"$bytes": "<base64>"}``; nothing
else is ever deserialized from a worker (no pickle), and a reader refuses a frame
longer than its limit before reading it.
"""

from __future__ import annotations

import base64
import json
import os
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
_BYTES = "$bytes"


class WireError(Exception):
    """The other side closed its pipe, sent a malformed frame or one past the limit."""


class FrameTooLargeError(WireError):
    """A frame longer than the reader's limit."""


class WireTimeoutError(WireError):
    """No whole frame arrived before the deadline."""


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)  # dates and such from an action file's args


def _object_hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and isinstance(obj.get(_BYTES), str):
        return base64.b64decode(obj[_BYTES])
    return obj


def encode(message: dict[str, Any]) -> bytes:
    """A message as one frame."""
    body = json.dumps(message, default=_default, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any]) -> None:
    """Write one message. Raises WireError when the other side is gone."""
    write_encoded(fd, encode(message))


def write_encoded(fd: int, frame: bytes) -> None:
    """Write one frame made by :func:`encode`. Raises WireError when the other side
    is gone."""
    view = memoryview(frame)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:  # BrokenPipeError and friends
        raise WireError(f"pipe closed: {exc}") from None


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WireTimeoutError("no answer before the deadline")
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise WireError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, *, limit: int, deadline: float | None = None) -> dict[str, Any]:
    """Read one message (waiting at most until ``deadline``, a ``time.monotonic()``).

    Raises:
        WireTimeoutError: the deadline passed first.
        FrameTooLargeError: the frame is longer than ``limit`` bytes.
        WireError: the pipe closed or the frame is not a JSON object.
    """
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    if size > limit:
        raise FrameTooLargeError(f"a frame of {size} bytes (limit {limit})")
    try:
        message = json.loads(_read_exactly(fd, size, deadline), object_hook=_object_hook)
    except ValueError as exc:
        raise WireError(f"malformed frame: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("malformed frame: not an object")
    return message
