"""The REST API and the replication service as the UI calls them.

Requests go to the server's own API application in-process (no socket), with the
signed-in user's key pair as basic auth, so the API's authentication, permission
checks and error messages apply to every page unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Mapping, MutableMapping
from typing import Any

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


class Backend:
    """One in-process HTTP client over the server's API application."""

    def __init__(self, app: ASGIApp) -> None:
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=("127.0.0.1", 0)),
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
