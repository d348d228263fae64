"""The REST API and the replication service as the UI calls them.

Requests go to the server's own API application in-process (no socket), with the
signed-in user's key pair as basic auth, so the API's authentication, permission
checks and error messages apply to every page unchanged.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    MutableMapping,
)
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

API = "/api/v1"
REPLICATION = "/service/replication/v1"


class ApiError(Exception):
    """A non-2xx answer: its status and the API's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500] or resp.reason_phrase
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return resp.reason_phrase


@dataclass
class Streamed:
    """An answer whose body is still arriving: for downloads of any size."""

    status: int
    headers: dict[str, str]
    body: AsyncIterator[bytes]


#: the client address of the UI's own calls of the API: never a browser's, so that the
#: failed sign-ins of an address (counted at the login form, by the browser's address)
#: never refuse the pages of a session that signed in from elsewhere
IN_PROCESS_CLIENT = ("ui.in-process", 0)


class Backend:
    """One in-process HTTP client over the server's API application."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=IN_PROCESS_CLIENT),
            base_url="http://ui.local", timeout=120.0)

    async def close(self) -> None:
        await self._client.aclose()

    async def request(self, auth: tuple[str, str], method: str, path: str, *,
                      params: Mapping[str, Any] | None = None, json: Any = None,
                      content: bytes | AsyncIterable[bytes] | None = None,
                      headers: Mapping[str, str] | None = None) -> httpx.Response:
        """Send one request; raise :class:`ApiError` unless it succeeded."""
        try:
            resp = await self._client.request(
                method, path, params={k: v for k, v in (params or {}).items() if v is not None},
                json=json, content=content, headers=headers, auth=auth)
        except httpx.HTTPError as e:
            raise ApiError(502, f"the server did not answer: {e}") from None
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, _message(resp))
        return resp

    async def json(self, auth: tuple[str, str], method: str, path: str,
                   **kwargs: Any) -> Any:
        resp = await self.request(auth, method, path, **kwargs)
        return resp.json() if resp.content else None

    async def stream(self, auth: tuple[str, str], path: str,
                     params: Mapping[str, str]) -> Streamed:
        """GET ``path`` from the API, its body passed on as it comes (httpx's in-process
        transport would hold all of it in memory first).

        Raises:
            ApiError: the API refused (its message), before any of the body is passed.
        """
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        scope: Scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": urlencode(params).encode(), "root_path": "",
            "headers": [(b"host", b"ui.local"), (b"authorization", f"Basic {token}".encode())],
            "server": ("ui.local", 80), "client": IN_PROCESS_CLIENT,
        }
        messages: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue(maxsize=8)
        finished = asyncio.Event()
        requested = False

        async def receive() -> MutableMapping[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            await messages.put(message)

        async def run() -> None:
            try:
                await self._app(scope, receive, send)
            finally:
                await messages.put({"type": "ui.done"})

        task = asyncio.create_task(run())
        start = await messages.get()
        if start["type"] != "http.response.start":
            finished.set()
            await task
            raise ApiError(502, "the server gave no answer")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in start.get("headers", [])}

        async def body() -> AsyncIterator[bytes]:
            try:
                while True:
                    message = await messages.get()
                    if message["type"] != "http.response.body":
                        return
                    if message.get("body"):
                        yield message["body"]
                    if not message.get("more_body", False):
                        return
            finally:  # the browser left, or the body ended: the API's call ends too
                finished.set()
                if not task.done():
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        status = int(start["status"])
        if status >= 400:
            content = b"".join([chunk async for chunk in body()])
            raise ApiError(status, _message(httpx.Response(status, content=content,
                                                           headers=headers)))
        return Streamed(status, headers, body())
