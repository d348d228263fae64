"""The API's front gate for request bodies: who sends it, how large, how fast.

A request with a body passes :class:`BodyGuard` before FastAPI sees it:

1. its route is found; a body larger than the route takes is refused with 413 from
   its Content-Length alone;
2. the sender of a body to a route that needs authentication is authenticated
   **before** the body is read (401 otherwise, and the body is never read);
3. the body is read under ``http.request_body_timeout`` per MiB (408 when it stops
   arriving) and, unless the route streams object data, at most ``limit`` bytes of it
   (413); a JSON body whose strings are no valid text is refused (400); then it is
   handed to the route. A route that streams object data reads it through
   the :class:`BodyReader` left in the request's state (:data:`BODY_STATE`).

A refused request's connection is closed: its unread body cannot be skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.routing import compile_path

from lakefs_core.api.errors import exception_response
from lakefs_core.api.security import CTX_STATE, authenticated
from lakefs_core.config import HttpConfig
from lakefs_core.errors import LakeFSError, PayloadTooLargeError
from lakefs_core.protocol.bodies import (
    BodyReader,
    Message,
    check_json_text,
    declared_length,
    has_body,
    header,
    is_json,
    too_large_message,
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]
ASGIApp = Callable[[Scope, Receive, Send], Any]

#: routes whose body is object data, streamed to the store (no size limit)
STREAMED_BODY_ROUTES = frozenset({"upload_object"})
#: routes that pass a body on to another service, which applies its own limits
FORWARDING_ROUTES = frozenset({"replication_proxy"})
#: where a streamed route finds its :class:`BodyReader` (in the request's state)
BODY_STATE = "lakefs_body"
#: the largest body a route that needs no authentication reads (login, setup)
PUBLIC_BODY_LIMIT = 64 << 10


@dataclass(frozen=True)
class _RouteRule:
    authenticated: bool
    streamed: bool
    limit: int


class BodyGuard:
    """ASGI middleware applying the rules above to the API it wraps.

    Args:
        app: The next ASGI app (FastAPI's middleware stack).
        routes: Returns the API's routes with their full paths (read once, at the first
            request with a body).
        http: The ``http`` settings.
    """

    def __init__(self, app: ASGIApp, *, routes: Callable[[], Iterable[tuple[str, APIRoute]]],
                 http: HttpConfig) -> None:
        self.app = app
        self._routes = routes
        self._rules: list[tuple[re.Pattern[str], set[str], _RouteRule]] | None = None
        self._limit = http.max_request_body
        self._timeout = http.request_body_timeout.total_seconds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope["headers"]):
            await self.app(scope, receive, send)
            return
        rule = self._rule(scope)
        declared = declared_length(scope["headers"])
        if not rule.streamed and declared is not None and declared > rule.limit:
            await self._refuse(scope, receive, send, PayloadTooLargeError(
                too_large_message(rule.limit)))
            return
        if rule.authenticated:
            try:
                ctx = await anyio.to_thread.run_sync(authenticated, Request(scope))
            except LakeFSError as exc:
                await self._refuse(scope, receive, send, exc)
                return
            scope.setdefault("state", {})[CTX_STATE] = ctx
        body = BodyReader(receive, timeout=self._timeout)
        if rule.streamed:
            scope.setdefault("state", {})[BODY_STATE] = body
            await self.app(scope, body.receive, send)
            return
        try:
            data = await body.read_all(rule.limit)
            content_type = header(scope["headers"], b"content-type")
            if content_type is None or is_json(content_type):  # FastAPI reads both as JSON
                check_json_text(data)
        except LakeFSError as exc:
            await self._refuse(scope, receive, send, exc)
            return
        await self.app(scope, _replay(data, receive), send)

    def _rule(self, scope: Scope) -> _RouteRule:
        if self._rules is None:
            self._rules = [(compile_path(path)[0], route.methods or set(),
                            self._rule_of(route)) for path, route in self._routes()]
        path, method = scope["path"], scope["method"].upper()
        partial: _RouteRule | None = None
        for regex, methods, rule in self._rules:
            if regex.match(path):
                if method in methods:
                    return rule
                partial = partial or rule
        return partial or _RouteRule(authenticated=False, streamed=False,
                                     limit=min(self._limit, PUBLIC_BODY_LIMIT))

    def _rule_of(self, route: APIRoute) -> _RouteRule:
        needs_auth = _depends_on(route.dependant, authenticated)
        if route.name in FORWARDING_ROUTES or needs_auth:
            limit = self._limit
        else:
            limit = min(self._limit, PUBLIC_BODY_LIMIT)
        return _RouteRule(authenticated=needs_auth, streamed=route.name in STREAMED_BODY_ROUTES,
                          limit=limit)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, exc: LakeFSError) -> None:
        response = exception_response(exc)
        response.headers["connection"] = "close"
        await response(scope, receive, send)


def _depends_on(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def _replay(data: bytes, receive: Receive) -> Callable[[], Any]:
    """A receive that hands over ``data`` as the whole body, then waits on the client
    (for its disconnect) as the original does."""
    sent = [False]

    async def replay() -> Message:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": data, "more_body": False}
        message: Message = await receive()
        return message

    return replay

