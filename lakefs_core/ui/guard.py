"""Limits on what the UI reads of a request body, applied before any of it is read.

A form is read only from a signed-in browser (the login form excepted), and is small:
at most :data:`MAX_LOGIN_BODY` for the login form, :data:`MAX_FORM_BODY` for any other
form; only the upload form carries a file of any size.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool

from lakefs_core.ui.backend import ASGIApp, Receive, Scope, Send
from lakefs_core.ui.session import COOKIE, SessionCodec

MAX_LOGIN_BODY = 64 * 1024
MAX_FORM_BODY = 1024 * 1024
UPLOAD_SUFFIX = "/objects/upload"


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return v.strip('"')
    return None


class UIGuard:
    """ASGI middleware: refuse unsigned-in and oversized request bodies unread."""

    def __init__(self, app: ASGIApp, codec: SessionCodec, prefix: str) -> None:
        self.app = app
        self.codec = codec
        self.login = f"{prefix}/login"
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if path == self.login:
            limit: int | None = MAX_LOGIN_BODY
        elif await run_in_threadpool(self.codec.open, _cookie(scope, COOKIE)) is None:
            await _answer(send, 303, b"", [(b"location", f"{self.login}?next="
                                            f"{quote(self.prefix + '/repositories')}".encode())])
            return
        else:
            limit = None if path.endswith(UPLOAD_SUFFIX) else MAX_FORM_BODY
        if limit is None:
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length" and value.isdigit() and int(value) > limit:
                await _answer(send, 413, f"a form of at most {limit} bytes".encode(), [])
                return
        seen = 0
        refused = False

        async def bounded() -> MutableMapping[str, Any]:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:  # answer now; the app sees the sender gone
                refused = True
                await _answer(send, 413, f"a form of at most {limit} bytes".encode(), [])
                return {"type": "http.disconnect"}
            return message

        async def unless_refused(message: MutableMapping[str, Any]) -> None:
            if not refused:
                await send(message)

        await self.app(scope, bounded, unless_refused)


async def _answer(send: Send, status: int, body: bytes,
                  headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
