"""The server's ASGI application: the REST API under /api/v1 and the S3 gateway.

Both doors share one port. Requests for the API's paths (``/api/``, ``/_health``,
``/service/``, ``/metrics``) go to the FastAPI app; everything else is an S3 request
for the gateway (bucket = repository, key = ``<ref>/<path>``).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from lakefs_core.api.errors import error_response, install_error_handlers
from lakefs_core.services import Services

log = logging.getLogger("lakefs_core.api")

API_PREFIX = "/api/v1"
API_PATH_PREFIXES = ("/api/", "/_health", "/service/", "/metrics", "/openapi.json", "/docs")

#: route modules under lakefs_core.api.routes; each defines ``router`` (an APIRouter)
ROUTE_MODULES = (
    "setup",
    "repositories",
    "branches",
    "commits",
    "refs",
    "tags",
    "objects",
    "auth",
    "replication_support",
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def create_api(services: Services) -> FastAPI:
    upstream = services.config.replication.endpoint.rstrip("/")
    proxy_client = httpx.AsyncClient(base_url=upstream, timeout=60.0)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await proxy_client.aclose()

    app = FastAPI(
        lifespan=lifespan,
        title="lakeFS-compatible API",
        version="1.0.0",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
    )
    app.state.services = services
    install_error_handlers(app)

    @app.get("/_health", include_in_schema=False)
    def health() -> Response:
        return Response(status_code=204)

    for name in ROUTE_MODULES:
        try:
            module = importlib.import_module(f"lakefs_core.api.routes.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"lakefs_core.api.routes.{name}":
                raise
            continue
        app.include_router(module.router, prefix=API_PREFIX)

    _install_replication_proxy(app, proxy_client)
    return app


def _install_replication_proxy(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Forward ``/service/replication/*`` to this region's replication sidecar."""
    upstream = str(client.base_url)

    @app.api_route("/service/replication/{path:path}",
                   methods=["GET", "POST", "PUT", "DELETE", "PATCH"], include_in_schema=False)
    async def replication_proxy(path: str, request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        try:
            upstream_req = client.build_request(
                request.method, f"/service/replication/{path}", params=request.query_params,
                headers=headers, content=await request.body())
            resp = await client.send(upstream_req, stream=True)
        except httpx.HTTPError as e:
            return error_response(502, f"replication service unreachable at {upstream}: {e}")
        passthrough = {k: v for k, v in resp.headers.items()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                            "content-encoding")}
        return StreamingResponse(resp.aiter_raw(), status_code=resp.status_code,
                                 headers=passthrough, background=BackgroundTask(resp.aclose))


class Dispatcher:
    """Routes each request to the API or to the S3 gateway by path."""

    def __init__(self, api: ASGIApp, gateway: ASGIApp | None) -> None:
        self.api = api
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.gateway is not None and _is_s3(scope):
            await self.gateway(scope, receive, send)
            return
        await self.api(scope, receive, send)


def _is_s3(scope: Scope) -> bool:
    """S3-signed requests go to the gateway whatever their path (a bucket may be called
    ``api`` or ``metrics``); unsigned ones go to the API on its paths."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value[:4] in (b"AWS4", b"AWS "):
            return True
    query: bytes = scope.get("query_string", b"")
    if b"X-Amz-Signature=" in query or b"AWSAccessKeyId=" in query:
        return True
    path: str = scope.get("path", "")
    return not path.startswith(API_PATH_PREFIXES)


def create_app(services: Services) -> Dispatcher:
    """The whole server: API and gateway on one ASGI app."""
    api = create_api(services)
    gateway: ASGIApp | None = None
    try:
        from lakefs_core.gateway.app import create_gateway
    except ModuleNotFoundError as e:
        if e.name != "lakefs_core.gateway.app":
            raise
    else:
        gateway = create_gateway(services)
    dispatcher = Dispatcher(api, gateway)
    dispatcher.fastapi = api  # type: ignore[attr-defined]
    return dispatcher
