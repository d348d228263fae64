"""The headers every answer of the UI carries: what a browser may load into its pages,
that no other site may frame them, and that nothing is sniffed.

An answer that sets one of them itself (an object's download, sandboxed) keeps its own.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from lakefs_core.ui.backend import ASGIApp, Receive, Scope, Send

#: the pages' own files only: no inline script, no plugin, no other site's form target,
#: and no frame of them anywhere
CONTENT_SECURITY_POLICY = ("default-src 'self'; img-src 'self' data:; object-src 'none'; "
                           "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
PAGE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)


class PageHeaders:
    """ASGI middleware adding :data:`PAGE_HEADERS` to every answer that lacks them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in PAGE_HEADERS
                            if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
