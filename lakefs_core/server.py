"""The whole server on one port: the REST API, the web UI and the S3 gateway.

Requests for the API's paths (``/api/``, ``/_health``, ``/service/``, ``/metrics``)
go to the FastAPI app; unsigned requests for ``/`` and ``/ui/...`` to the web UI;
everything else, and anything S3-signed, is an S3 request for the gateway
(bucket = repository, key = ``<ref>/<path>``).
"""

from __future__ import annotations

from lakefs_core.api.app import API_PATH_PREFIXES, ASGIApp, Receive, Scope, Send, create_api
from lakefs_core.gateway.app import create_gateway
from lakefs_core.services import Services
from lakefs_core.ui import UI_PREFIX, create_ui


class Dispatcher:
    """Routes each request to the API, the web UI or the S3 gateway by path."""

    def __init__(self, api: ASGIApp, gateway: ASGIApp | None, ui: ASGIApp | None = None) -> None:
        self.api = api
        self.gateway = gateway
        self.ui = ui

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.ui is not None and _is_ui(scope):
            await self.ui(scope, receive, send)
            return
        if scope["type"] == "http" and self.gateway is not None and _is_s3(scope):
            await self.gateway(scope, receive, send)
            return
        await self.api(scope, receive, send)


def _is_ui(scope: Scope) -> bool:
    """Unsigned requests for ``/`` or under ``/ui`` are for the web UI."""
    path: str = scope.get("path", "")
    if path != "/" and path != UI_PREFIX and not path.startswith(UI_PREFIX + "/"):
        return False
    return not _is_signed(scope)


def _is_signed(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value[:4] in (b"AWS4", b"AWS "):
            return True
    query: bytes = scope.get("query_string", b"")
    return b"X-Amz-Signature=" in query or b"AWSAccessKeyId=" in query


def _is_s3(scope: Scope) -> bool:
    """S3-signed requests go to the gateway whatever their path (a bucket may be called
    ``api`` or ``metrics``); unsigned ones go to the API on its paths."""
    if _is_signed(scope):
        return True
    path: str = scope.get("path", "")
    return not path.startswith(API_PATH_PREFIXES)


def create_app(services: Services) -> Dispatcher:
    """The whole server: API, web UI and gateway on one ASGI app."""
    api = create_api(services)
    dispatcher = Dispatcher(api, create_gateway(services), create_ui(services, api))
    dispatcher.fastapi = api  # type: ignore[attr-defined]
    return dispatcher
