"""A real server (uvicorn on loopback, in a thread) for API, SDK and gateway tests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from lakefs_core.config import load_server_config
from lakefs_core.server import create_app
from lakefs_core.services import Services, build_services
from lakefs_testing.servers import free_port

ADMIN_KEY = "AKIAIOSFOLQUICKSTART"
ADMIN_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@dataclass
class LiveServer:
    services: Services
    port: int
    access_key_id: str = ADMIN_KEY
    secret_access_key: str = ADMIN_SECRET

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api(self) -> str:
        return f"{self.endpoint}/api/v1"

    def client(self, key: str | None = None, secret: str | None = None) -> httpx.Client:
        """An httpx client for the API with basic auth (the admin's by default)."""
        return httpx.Client(base_url=self.api, timeout=60.0,
                            auth=(key or self.access_key_id, secret or self.secret_access_key))


@contextlib.contextmanager
def live_server(data_dir: str, env: Mapping[str, str] | None = None,
                *, setup_admin: bool = True, port: int | None = None) -> Iterator[LiveServer]:
    """Start a server with config from ``env`` (LAKEFS_* variables) over ``data_dir``."""
    environ: dict[str, Any] = {"LAKEFS_DATA_DIR": data_dir, **(env or {})}
    config = load_server_config(None, environ)
    config.storage_config.default_namespace_prefix = (
        config.storage_config.default_namespace_prefix or "local://")
    services = build_services(config)
    if setup_admin:
        services.auth.setup_admin("admin", ADMIN_KEY, ADMIN_SECRET)
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(services), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(services=services, port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        services.close()
