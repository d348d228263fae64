"""The object requests clients send most, on a lean path beside FastAPI.

A stat (``GET .../refs/{ref}/objects/stat``), a read (``GET .../refs/{ref}/objects``)
and a raw upload (``POST .../branches/{branch}/objects``) with basic auth are
answered by the same route functions as through FastAPI
(:mod:`lakefs_core.api.routes.objects`), without the framework's routing, dependency
resolution and validation, and with one thread hand-off at most instead of two to
four: these costs were most of what such a request cost the server. Anything the lane
would have to interpret otherwise goes to FastAPI, which answers it as it always did,
errors included: another kind of authentication, a query parameter it does not know
or a value it would have to coerce, a pre-signed read, a multipart form, a body that
is chunked or larger than one piece (:data:`~lakefs_core.protocol.bodies.PIECE_SIZE`).

Where the database is SQLite and every store a local disk
(:attr:`Services.serves_locally`), a read is answered on the event loop: it blocks no
longer than handing it to a thread would cost. Elsewhere (a database or a store
across the network) it runs in one thread of the API's pool. An upload is
authenticated, authorized and checked before its body is read, as through
:class:`~lakefs_core.api.guard.BodyGuard`. Where reads are answered on the event
loop, so is an upload: its data is written to the disk there, and it is staged there
too when SQLite's write lock is free (:func:`~lakefs_core.database.without_waiting`);
while another writer holds the lock, the staging is tried again a few times within
4 ms, the loop answering other requests meanwhile, and then waits for the lock in one
thread of the transfer pool (:func:`stage_without_blocking`). Elsewhere the upload is
written and staged in one thread of the transfer pool.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

import anyio
import anyio.to_thread
from starlette.responses import Response

from lakefs_core.api.errors import failure_response
from lakefs_core.api.routes.objects import (
    META_PREFIX,
    ObjectStats,
    content_type_of,
    get_object,
    metadata_from_headers,
    object_stats,
    preflight_upload,
    stat_object,
    store_object,
)
from lakefs_core.api.security import Ctx, basic_auth_ctx, object_arn
from lakefs_core.auth import rbac
from lakefs_core.auth.service import parse_basic_authorization
from lakefs_core.database import WouldWait, without_waiting
from lakefs_core.errors import LakeFSError
from lakefs_core.graveler.model import Branch, Repository
from lakefs_core.graveler.refs import validate_path
from lakefs_core.protocol.bodies import PIECE_SIZE, BodyReader, declared_length, header
from lakefs_core.protocol.http import WriteConditions, write_conditions
from lakefs_core.services import Services

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]
ASGIApp = Callable[[Scope, Receive, Send], Any]

_REFS = re.compile(r"/api/v1/repositories/([^/]+)/refs/([^/]+)/objects(/stat)?")
_BRANCHES = re.compile(r"/api/v1/repositories/([^/]+)/branches/([^/]+)/objects")
#: the values of a boolean query parameter the lane reads itself (FastAPI takes more)
_FLAGS = {"true": True, "false": False, "1": True, "0": False}
_STAT_QUERY = frozenset({"path", "user_metadata", "presign"})
_READ_QUERY = frozenset({"path", "presign"})
_UPLOAD_QUERY = frozenset({"path", "storageClass", "force"})
_META = META_PREFIX.encode()
#: the pauses of an upload's staging on the event loop while SQLite's write lock is
#: taken, before it waits for the lock in a thread: another worker's staging holds the
#: lock for well under a millisecond, and a thread hand-off (with SQLite's first wait of
#: a millisecond) cost more than these tries under load
LOOP_RETRIES = (0.0002, 0.0005, 0.001, 0.002)


class ObjectLane:
    """ASGI middleware serving the requests above, in front of the API's FastAPI app.

    Args:
        api: The FastAPI app (with its middleware), which answers everything else.
        services: The server's services.
        transfer_limiter: The threads that move object data (``http.transfer_threads``).
    """

    def __init__(self, api: ASGIApp, services: Services,
                 transfer_limiter: anyio.CapacityLimiter) -> None:
        self.api = api
        self.services = services
        self.transfer_limiter = transfer_limiter
        self.inline = services.serves_locally
        self.inline_uploads = (self.inline
                               and services.graveler.refstore.stages_without_waiting)
        self.body_timeout = services.config.http.request_body_timeout.total_seconds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not await self._served(scope, receive, send):
            await self.api(scope, receive, send)

    async def _served(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request if it is one of the lane's; whether it was."""
        method, path = scope["method"], scope["path"]
        if method == "GET":
            found = _REFS.fullmatch(path)
            if found is None:
                return False
            repository, ref, stat = found.groups()
            return await self._read(scope, receive, send, repository, ref, bool(stat))
        if method == "POST":
            found = _BRANCHES.fullmatch(path)
            if found is None:
                return False
            return await self._upload(scope, receive, send, *found.groups())
        return False

    async def _read(self, scope: Scope, receive: Receive, send: Send, repository: str,
                    ref: str, stat: bool) -> bool:
        query = _query(scope, _STAT_QUERY if stat else _READ_QUERY)
        creds = _basic_credentials(scope)
        if query is None or creds is None or query.get("presign", "false") != "false":
            return False
        path = query["path"]
        if stat:
            user_metadata = _FLAGS.get(query.get("user_metadata", "true"))
            if user_metadata is None:
                return False

            def answer(ctx: Ctx) -> Response:
                stats = stat_object(repository, ref, ctx, path, bool(user_metadata), None)
                return Response(stats.model_dump_json(exclude_none=True),
                                media_type="application/json")
        else:
            headers = scope["headers"]
            range_header, if_none_match, if_match = (
                _text(header(headers, name)) for name in (b"range", b"if-none-match",
                                                          b"if-match"))

            def answer(ctx: Ctx) -> Response:
                return get_object(repository, ref, ctx, path, None, range_header,
                                  if_none_match, if_match)

        address = _client_address(scope)

        def serve() -> Response:
            try:
                return answer(basic_auth_ctx(self.services, address, creds))
            except LakeFSError as exc:
                return failure_response(exc)

        response = serve() if self.inline else await anyio.to_thread.run_sync(serve)
        await response(scope, receive, send)
        return True

    async def _upload(self, scope: Scope, receive: Receive, send: Send, repository: str,
                      branch: str) -> bool:
        headers = scope["headers"]
        query = _query(scope, _UPLOAD_QUERY)
        creds = _basic_credentials(scope)
        length = declared_length(headers)
        content_type = _text(header(headers, b"content-type")) or ""
        if (query is None or creds is None or length is None or length > PIECE_SIZE
                or header(headers, b"transfer-encoding") is not None
                or _FLAGS.get(query.get("force", "false")) is None
                or content_type.lower().startswith("multipart/form-data")):
            return False
        path = query["path"]
        address = _client_address(scope)
        services = self.services

        def prepare() -> tuple[Any, ...]:
            """What FastAPI's route checks before the body is read, in its order."""
            ctx = basic_auth_ctx(services, address, creds)
            ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
            validate_path(path)
            conditions = write_conditions(_text(header(headers, b"if-none-match")),
                                          _text(header(headers, b"if-match")))
            # names arrive lower-cased (ASGI): most uploads carry no metadata at all
            metadata = metadata_from_headers(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in headers
                if k.startswith(_META))
            checked = preflight_upload(services, repository, branch, path, conditions)
            return conditions, metadata, checked

        try:
            conditions, metadata, checked = (
                prepare() if self.inline else await anyio.to_thread.run_sync(prepare))
        except LakeFSError as exc:
            refusal = failure_response(exc)
            refusal.headers["connection"] = "close"  # the unread body cannot be skipped
            await refusal(scope, receive, send)
            return True
        response: Response
        try:
            data = await BodyReader(receive, timeout=self.body_timeout,
                                    expect_body=length > 0).read_all(PIECE_SIZE)
            kind = content_type_of(content_type)
            if self.inline_uploads:
                stats = await self._store_inline(checked, path, data, kind, metadata,
                                                 conditions)
            else:
                stats = await anyio.to_thread.run_sync(
                    lambda: store_object(services, repository, branch, path, [data], kind,
                                         metadata, conditions, checked=checked),
                    limiter=self.transfer_limiter)
            response = Response(stats.model_dump_json(exclude_none=True), status_code=201,
                                media_type="application/json")
        except LakeFSError as exc:
            response = failure_response(exc)
        await response(scope, receive, send)
        return True

    async def _store_inline(self, checked: tuple[Repository, Branch], path: str,
                            data: bytes, kind: str, metadata: dict[str, str],
                            conditions: WriteConditions) -> ObjectStats:
        """What :func:`store_object` does, on the event loop: the data is written to
        the local disk here, and staged here too (:func:`stage_without_blocking`)."""
        services = self.services
        repo, current = checked
        entry = services.catalog.write_data(repo, [data], kind, metadata)

        def stage() -> None:
            services.graveler.stage_checked(repo, current, path, entry,
                                            if_absent=conditions.if_absent,
                                            if_match=conditions.if_match)

        await stage_without_blocking(stage, self.transfer_limiter)
        return object_stats(services, repo, path, entry)


async def stage_without_blocking(stage: Callable[[], None], limiter: anyio.CapacityLimiter,
                                 delays: tuple[float, ...] = LOOP_RETRIES) -> None:
    """Run ``stage``, a write to SQLite, on the event loop without waiting for the write
    lock (:func:`~lakefs_core.database.without_waiting`). While another writer holds
    the lock, try again after each of ``delays`` seconds, the loop answering other
    requests meanwhile; then wait for the lock in one thread of ``limiter``, where
    waiting blocks no one else.

    ``stage`` may run more than once: a try refused for the lock wrote nothing.
    """
    for delay in (*delays, None):
        try:
            with without_waiting():
                stage()
            return
        except WouldWait:
            if delay is None:
                break
        await asyncio.sleep(delay)
    await anyio.to_thread.run_sync(stage, limiter=limiter)


def _query(scope: Scope, known: frozenset[str]) -> dict[str, str] | None:
    """The query's parameters if each is one the lane knows, given once, and ``path``
    is among them; None otherwise (FastAPI decides)."""
    pairs = query_pairs(scope["query_string"].decode("latin-1"))
    query = dict(pairs)
    if len(query) != len(pairs) or "path" not in query or not query.keys() <= known:
        return None
    return query


def query_pairs(query: str) -> list[tuple[str, str]]:
    """``urllib.parse.parse_qsl(query, keep_blank_values=True)``, at a third of its cost:
    only what is escaped is unescaped."""
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        if "%" in name or "+" in name:
            name = unquote(name.replace("+", " "))
        if "%" in value or "+" in value:
            value = unquote(value.replace("+", " "))
        pairs.append((name, value))
    return pairs


def _basic_credentials(scope: Scope) -> tuple[str, str] | None:
    """The request's basic auth key pair; None without one, or when it is malformed
    (FastAPI answers that)."""
    value = header(scope["headers"], b"authorization")
    if value is None:
        return None
    try:
        return parse_basic_authorization(value.decode("latin-1"))
    except LakeFSError:
        return None


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""
