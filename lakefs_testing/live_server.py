"""A real server for API, SDK and gateway tests: uvicorn on loopback in a thread
(:func:`live_server`), or ``python -m lakefs_core run`` in a child process with one or
more worker processes (:func:`server_process`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from lakefs_core.auth.throttle import MAX_WAIT_SECONDS, SignInThrottle
from lakefs_core.config import load_server_config
from lakefs_core.protocol.serving import uvicorn_http_options
from lakefs_core.server import create_app
from lakefs_core.services import Services, build_services
from lakefs_testing.servers import child_server, free_port

ADMIN_KEY = "AKIAIOSFOLQUICKSTART"
ADMIN_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class _Address:
    """Where a server on loopback answers, and an API client with its admin's key."""

    port: int
    access_key_id: str
    secret_access_key: str

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


    def repo_writer(self, username: str, repository: str) -> tuple[str, str]:
        """Create ``username``, whose only policy is ``fs:*`` on ``repository`` and
        everything in it (through the API, as the admin); its access key pair."""
        arn = f"arn:lakefs:fs:::repository/{repository}"
        with self.client() as admin:
            for method, path, body in (
                    ("POST", "/auth/policies", {"id": f"{username}-writes", "statement": [
                        {"effect": "allow", "action": ["fs:*"], "resource": arn},
                        {"effect": "allow", "action": ["fs:*"], "resource": f"{arn}/*"}]}),
                    ("POST", "/auth/users", {"id": username}),
                    ("PUT", f"/auth/users/{username}/policies/{username}-writes", None)):
                admin.request(method, path, json=body).raise_for_status()
            created = admin.post(f"/auth/users/{username}/credentials")
            created.raise_for_status()
        return created.json()["access_key_id"], created.json()["secret_access_key"]


@dataclass
class LiveServer(_Address):
    services: Services
    port: int
    access_key_id: str = ADMIN_KEY
    secret_access_key: str = ADMIN_SECRET

    @contextlib.contextmanager
    def patient_sign_in_throttle(self, first_wait: float = 120.0) -> Iterator[SignInThrottle]:
        """A fresh sign-in limit whose first wait is ``first_wait`` seconds (the
        default's is one) while the block runs: a test of the limit then does not
        depend on how fast a loaded machine runs it."""
        kept = self.services.sign_ins
        self.services.sign_ins = SignInThrottle(first_wait=first_wait,
                                                max_wait=max(first_wait, MAX_WAIT_SECONDS))
        try:
            yield self.services.sign_ins
        finally:
            self.services.sign_ins = kept


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
                                           log_level="warning", access_log=False,
                                           **uvicorn_http_options(config.http.max_request_head)))
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


@dataclass
class ServerProcess(_Address):
    """``python -m lakefs_core run`` in a child process; its output goes to ``output``."""

    port: int
    process: subprocess.Popen[bytes]
    output: Path
    access_key_id: str = ADMIN_KEY
    secret_access_key: str = ADMIN_SECRET


@contextlib.contextmanager
def server_process(data_dir: str | Path, env: Mapping[str, str] | None = None, *,
                   workers: int = 1, port: int | None = None) -> Iterator[ServerProcess]:
    """Run the server as its command line does, with ``workers`` worker processes.

    The admin (:data:`ADMIN_KEY`) is set up by the installation settings; ``env``
    (``LAKEFS_*`` variables) adds to the configuration, and no other ``LAKEFS_*``
    variable of this process reaches the server. Yields once ``/_health`` answers;
    stops the server afterwards.
    """
    port = port or free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAKEFS_")}
    environ.update({
        "LAKEFS_DATA_DIR": str(data_dir), "LAKEFS_LISTEN_ADDRESS": f"127.0.0.1:{port}",
        "LAKEFS_WORKERS": str(workers), "LAKEFS_INSTALLATION_USER_NAME": "admin",
        "LAKEFS_INSTALLATION_ACCESS_KEY_ID": ADMIN_KEY,
        "LAKEFS_INSTALLATION_SECRET_ACCESS_KEY": ADMIN_SECRET, **(env or {})})
    output = Path(data_dir).parent / f"server-{port}.out"
    with child_server([sys.executable, "-m", "lakefs_core", "run"],
                      f"http://127.0.0.1:{port}/_health", output, env=environ) as proc:
        yield ServerProcess(port, proc, output)
