"""The whole server on one port: the REST API, the web UI and the S3 gateway.

Requests for the API's paths (``/api/``, ``/_health``, ``/service/``, ``/metrics``)
go to the FastAPI app; unsigned requests for ``/`` and ``/ui/...`` to the web UI;
everything else, and anything S3-signed, is an S3 request for the gateway
(bucket = repository, key = ``<ref>/<path>``).

The server runs as one process (:func:`serve`) or as ``workers`` processes on one
listening socket (:func:`serve_workers`); docs/ARCHITECTURE.md ("Several server
processes") says what each process keeps and why they agree.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import anyio.to_thread

from lakefs_core.api.app import API_PATH_PREFIXES, ASGIApp, Receive, Scope, Send, create_api
from lakefs_core.api.object_lane import ObjectLane
from lakefs_core.config import ServerConfig
from lakefs_core.gateway.app import create_gateway
from lakefs_core.logs import configure_logging
from lakefs_core.memory import MemoryReleaser, leave_pandas_unloaded, tune_allocator
from lakefs_core.protocol.serving import uvicorn_http_options
from lakefs_core.services import Services, build_services
from lakefs_core.ui import UI_PREFIX, create_ui

#: the response header that names the worker process that answered (at DEBUG level)
WORKER_HEADER = "x-lakefs-worker"
#: a worker that answers no health check of its parent for this long is replaced (it
#: answers from its own thread, but starting one takes seconds on a loaded machine)
WORKER_HEALTHCHECK_SECONDS = 60


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
    """The whole server: API (its most frequent object requests on a lean path), web
    UI and gateway on one ASGI app."""
    api = create_api(services)
    lane = ObjectLane(api, services, api.state.transfer_limiter)
    dispatcher = Dispatcher(lane, create_gateway(services), create_ui(services, api))
    dispatcher.fastapi = api  # type: ignore[attr-defined]
    return dispatcher


class WorkerApp:
    """The app of one worker process: the whole server, closing its handles when the
    process shuts down, and at DEBUG level naming the process in every response
    (:data:`WORKER_HEADER`, its process id) so that an operator can see which worker
    answered."""

    def __init__(self, app: ASGIApp, services: Services, *, tag: bool) -> None:
        self.app = app
        self.services = services
        self._tag = str(os.getpid()).encode() if tag else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            async def closing(message: Any) -> None:
                if message["type"] == "lifespan.shutdown.complete":
                    await anyio.to_thread.run_sync(self.services.close)
                await send(message)

            await self.app(scope, receive, closing)
            return
        tag = self._tag
        if tag is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [
                    *message.get("headers", ()), (WORKER_HEADER.encode(), tag)]}
            await send(message)

        await self.app(scope, receive, tagged)


def create_worker_app(config: ServerConfig) -> WorkerApp:
    """Open one worker process's handles and its app (uvicorn calls it in the worker).

    The startup tasks ran in the first process before the workers started.
    """
    tune_allocator()
    leave_pandas_unloaded()
    MemoryReleaser().start()  # for the worker's life: a daemon thread
    configure_logging(config.logging.level, config.logging.format)
    services = build_services(config, startup_tasks=False)
    try:
        return WorkerApp(create_app(services), services, tag=config.logging.level == "DEBUG")
    except BaseException:
        services.close()
        raise


def _uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    host, _, port = config.listen_address.rpartition(":")
    return {"host": host.strip("[]") or "0.0.0.0", "port": int(port),
            "log_level": config.logging.level.lower().replace("warn", "warning"),
            "log_config": None,  # uvicorn logs through ours
            "access_log": False,
            **uvicorn_http_options(config.http.max_request_head)}


def serve(services: Services) -> None:
    """Serve in this process until it is told to stop."""
    import uvicorn

    releaser = MemoryReleaser().start()
    try:
        uvicorn.run(create_app(services), **_uvicorn_options(services.config))
    finally:
        releaser.stop()


def serve_workers(config: ServerConfig) -> None:
    """Serve with ``config.workers`` processes on one listening socket until told to stop.

    This process binds the socket, starts the workers, replaces one that dies or
    hangs, and stops them all on SIGINT or SIGTERM. Each worker opens its own handles
    from the same config (:func:`create_worker_app`).
    """
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    uv = uvicorn.Config(functools.partial(create_worker_app, config), factory=True,
                        workers=config.workers,
                        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
                        **_uvicorn_options(config))
    socket = uv.bind_socket()
    try:
        Multiprocess(uv, sockets=[socket]).run()
    finally:
        socket.close()
