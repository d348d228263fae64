"""The REST API's ASGI application: lakeFS's API under /api/v1, health, and the proxy
of ``/service/replication/*`` to this region's replication service.

:mod:`lakefs_core.server` puts it on one port with the S3 gateway.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from lakefs_core.api.errors import error_response, install_error_handlers
from lakefs_core.api.guard import BodyGuard
from lakefs_core.api.security import basic_credentials, client_address
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
    "pulls",
    "actions",
    "objects",
    "imports",
    "presigned_uploads",
    "metadata",
    "symlinks",
    "usage",
    "auth",
    "retention",
    "dump",
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
        services.start_housekeeping()
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(services.stop_housekeeping)
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
    async def health() -> Response:  # on the event loop: answers even if threads are busy
        return Response(status_code=204)

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        """Prometheus metrics (as lakeFS, unauthenticated): failed hooks; to clients of
        ``metrics.allowed_networks`` only, since they name repositories and hooks."""
        if not services.config.metrics.allows(client_address(request)):
            return error_response(403, "metrics are served to metrics.allowed_networks only")
        body = (generate_latest(services.actions.alerts.registry)
                if services.actions is not None else b"")
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    routers: list[APIRouter] = []
    for name in ROUTE_MODULES:
        try:
            module = importlib.import_module(f"lakefs_core.api.routes.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"lakefs_core.api.routes.{name}":
                raise
            continue
        app.include_router(module.router, prefix=API_PREFIX)
        routers.append(module.router)

    _install_replication_proxy(app, proxy_client, services)

    def routes() -> Iterator[tuple[str, APIRoute]]:
        for router in routers:
            yield from ((API_PREFIX + r.path, r) for r in router.routes
                        if isinstance(r, APIRoute))
        yield from ((r.path, r) for r in app.routes if isinstance(r, APIRoute))

    app.state.transfer_limiter = anyio.CapacityLimiter(services.config.http.transfer_threads)
    app.add_middleware(BodyGuard, routes=routes, http=services.config.http)
    return app


#: the sidecar paths the server forwards: its API (nothing else it serves)
_PROXIED_PREFIX = "/service/replication/v1/"


def _confined(path: str) -> str | None:
    """The sidecar path for ``/service/replication/<path>`` (decoded), re-encoded; None
    if it leaves the sidecar's API (``..`` segments, empty segments, other prefixes)."""
    segments = path.split("/")
    if any(seg in ("", ".", "..") for seg in segments):
        return None
    target = "/service/replication/" + "/".join(quote(seg, safe="") for seg in segments)
    return target if target.startswith(_PROXIED_PREFIX) else None


def _install_replication_proxy(app: FastAPI, client: httpx.AsyncClient,
                               services: Services) -> None:
    """Forward ``/service/replication/*`` to this region's replication sidecar.

    A door like the API's own: failed sign-ins (the sidecar's 401s) are counted by the
    client's address and access key, and a client that must wait is answered 429
    here, never forwarded (the sidecar sees only this server's address).
    """
    upstream = str(client.base_url)

    @app.api_route("/service/replication/{path:path}",
                   methods=["GET", "POST", "PUT", "DELETE", "PATCH"], include_in_schema=False)
    async def replication_proxy(path: str, request: Request) -> Response:
        target = _confined(path)
        if target is None:
            return error_response(404, "not found")
        creds = basic_credentials(request)
        address = client_address(request)
        if creds is not None:
            services.sign_ins.check(address, creds[0])
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        try:
            upstream_req = client.build_request(
                request.method, target, params=request.query_params,
                headers=headers, content=await request.body())
            resp = await client.send(upstream_req, stream=True)
        except httpx.HTTPError as e:
            log.warning("replication service unreachable at %s: %s", upstream, e)
            return error_response(502, "replication service unreachable")
        if creds is not None and resp.status_code == 401:
            services.sign_ins.failed(address, creds[0])
        elif creds is not None and resp.status_code < 400:
            services.sign_ins.succeeded(address, creds[0])
        passthrough = {k: v for k, v in resp.headers.items()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                            "content-encoding")}
        return StreamingResponse(resp.aiter_raw(), status_code=resp.status_code,
                                 headers=passthrough, background=BackgroundTask(resp.aclose))
