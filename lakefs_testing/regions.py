"""Two regions in one process, each a live server and replication sidecars.

Each region has its own data directory (SQLite refstore and auth tables, local
blockstore); both share the mirrors table they are given. Also the REST calls the
tests, e2e runs and benchmarks make of them most (create a repository, upload,
commit, create a mirror).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml

from lakefs_core.graveler.graveler import Graveler
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer, live_server
from lakefs_testing.replication_user import ReplicationUser
from lakefs_testing.servers import MOTO_ENV, free_port
from replication.__main__ import uvicorn_options as sidecar_uvicorn_options
from replication.api import create_app as create_sidecar_app
from replication.config import load_replication_config
from replication.sidecar import Sidecar

SECRET_KEY = "two-region-shared-secret"
ORG = "test-org"


@dataclass
class SidecarHandle:
    sidecar: Sidecar
    port: int
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sidecar.stop()


@dataclass
class Region:
    name: str
    root: Path
    server: LiveServer
    sidecar_port: int
    config_path: Path
    sidecars: list[SidecarHandle] = field(default_factory=list)

    @property
    def graveler(self) -> Graveler:
        return self.server.services.graveler

    @property
    def blockstore_root(self) -> Path:
        return self.root / "blockstore"

    def client(self, key: str = ADMIN_KEY, secret: str = ADMIN_SECRET) -> httpx.Client:
        return httpx.Client(base_url=self.server.endpoint, auth=(key, secret), timeout=60)

    def start_sidecar(self, *, port: int | None = None) -> SidecarHandle:
        """Start a sidecar replica (the first one on the region's sidecar port)."""
        port = port or (self.sidecar_port if not self.sidecars else free_port())
        config = load_replication_config(str(self.config_path), env={})
        # the other replicas of the region reach this one where it listens
        config.advertised_address = f"http://127.0.0.1:{port}"
        sidecar = Sidecar(config)
        sidecar.start()
        server = uvicorn.Server(uvicorn.Config(create_sidecar_app(sidecar),
                                               **sidecar_uvicorn_options(f"127.0.0.1:{port}")))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("sidecar did not start")
            time.sleep(0.02)
        handle = SidecarHandle(sidecar, port, server, thread)
        self.sidecars.append(handle)
        return handle

    def stop_sidecars(self) -> None:
        while self.sidecars:
            self.sidecars.pop().stop()


def replication_config(region: str, root: Path, other: str, other_endpoint: str,
                       own_endpoint: str, port: int, mirrors_database: dict[str, Any],
                       mode: str, other_root: Path, interval: str,
                       credentials: tuple[str, str] = (ADMIN_KEY, ADMIN_SECRET),
                       external_prefixes: tuple[str, ...] = (),
                       database: dict[str, Any] | None = None,
                       stores: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One region's replication settings; ``stores`` maps a region to its ``blockstores``
    section (a region not named has one local store in its data directory)."""
    stores = stores or {}
    builtin: dict[str, Any] = {"concurrency": 4, "retries": 2}
    if mode == "builtin-direct":
        builtin["source_blockstores"] = {
            other: stores.get(other) or {"type": "local", "local": {
                "path": str(other_root / "blockstore"),
                "allowed_external_prefixes": list(external_prefixes)}}}
    blockstore: dict[str, Any] = (
        {"blockstores": stores[region]} if region in stores
        else {"blockstore": {"type": "local", "local": {
            "path": str(root / "blockstore"),
            "allowed_external_prefixes": list(external_prefixes)}}})
    return {
        "region": region,
        "organization_id": ORG,
        "regional_endpoint": own_endpoint,
        "dst_endpoints": {other: other_endpoint},
        "listen_address": f"127.0.0.1:{port}",
        "mirrors_database": mirrors_database,
        "refstore_database": database or {"type": "local",
                                          "local": {"path": str(root / "metadata.db")}},
        **blockstore,
        "auth": {"encrypt": {"secret_key": SECRET_KEY}},
        "source_lakefs": {"access_key_id": credentials[0], "secret_access_key": credentials[1]},
        "commit_sensor": {"process_branches_duration": interval},
        "mirrors_manager": {"process_mirrors_interval_duration": interval},
        "lag_history": {"interval": "1s", "window": "10m"},
        "validator": {"cooldown_on_error": "1s", "cooldown_on_missing": "5s",
                      "missing_recheck_interval": "200ms"},
        "object_replication": {"mode": "native" if mode == "native" else "builtin",
                               "builtin": builtin},
    }


@contextlib.contextmanager
def two_regions(tmp: Path, mirrors_database: dict[str, Any], *, mode: str = "builtin",
                interval: str = "2s", sidecars: bool = True,
                user: ReplicationUser | None = None,
                external_prefixes: tuple[str, ...] = (),
                databases: dict[str, dict[str, Any]] | None = None,
                stores: dict[str, dict[str, Any]] | None = None,
                ) -> Iterator[tuple[Region, Region]]:
    """Regions "east" (source) and "west" (destination), servers and sidecars running.

    The sidecars act as ``user`` (created in both regions) if given, else as the admin.
    ``external_prefixes``: directories both regions may import from and read imported
    files in (``blockstore.local.allowed_external_prefixes``).
    ``databases`` maps a region to its server's ``database`` settings block (see
    :func:`postgres_database` and :func:`dynamodb_database`), which its sidecars get
    as ``refstore_database``; a region not named keeps SQLite in its data directory.
    ``stores`` maps a region to its ``blockstores`` section (several stores with ids,
    for its server and its sidecars; with ``mode="builtin-direct"`` the other region's
    sidecars read it directly); a region not named has one local store.
    """
    databases = databases or {}
    stores = stores or {}
    credentials = ((user.access_key_id, user.secret_access_key) if user is not None
                   else (ADMIN_KEY, ADMIN_SECRET))
    names = ("east", "west")
    roots = {n: tmp / n for n in names}
    server_ports = {n: free_port() for n in names}
    sidecar_ports = {n: free_port() for n in names}
    with contextlib.ExitStack() as stack:
        regions: dict[str, Region] = {}
        for n in names:
            other = names[1 - names.index(n)]
            env = {
                "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": SECRET_KEY,
                "LAKEFS_REPLICATION_ENDPOINT": f"http://127.0.0.1:{sidecar_ports[n]}",
            }
            if external_prefixes:
                env["LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED"] = "true"
                env["LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES"] = json.dumps(
                    list(external_prefixes))
            if n in stores:
                roots[n].mkdir(parents=True, exist_ok=True)
                server_yaml = roots[n] / "lakefs.yaml"
                server_yaml.write_text(yaml.safe_dump({"blockstores": stores[n]}))
                env["LAKEFS_CONFIG_FILE"] = str(server_yaml)
            if n in databases:
                env |= database_env(databases[n])
            server = stack.enter_context(live_server(str(roots[n]), env,
                                                     port=server_ports[n]))
            cfg = replication_config(
                n, roots[n], other, f"http://127.0.0.1:{server_ports[other]}",
                f"http://127.0.0.1:{server_ports[n]}", sidecar_ports[n], mirrors_database,
                mode, roots[other], interval, credentials, external_prefixes,
                databases.get(n), stores)
            path = roots[n] / "replication.yaml"
            path.write_text(yaml.safe_dump(cfg))
            regions[n] = Region(n, roots[n], server, sidecar_ports[n], path)
            if user is not None:
                user.create_through_api(server.endpoint, ADMIN_KEY, ADMIN_SECRET)
        try:
            if sidecars:
                for r in regions.values():
                    r.start_sidecar()
            yield regions["east"], regions["west"]
        finally:
            for r in regions.values():
                r.stop_sidecars()


def postgres_database(url: str) -> dict[str, Any]:
    """A ``database`` block: the PostgreSQL database at ``url`` (refs and auth)."""
    return {"type": "postgres", "postgres": {"connection_string": url}}


def dynamodb_database(endpoint: str, table: str, auth_path: Path) -> dict[str, Any]:
    """A ``database`` block: the refs on DynamoDB ``table`` at ``endpoint`` (moto), the
    auth store in the SQLite file ``auth_path`` beside it."""
    return {"type": "dynamodb",
            "dynamodb": {"table_name": table, "endpoint": endpoint,
                         "aws_region": MOTO_ENV["AWS_DEFAULT_REGION"],
                         "aws_access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
                         "aws_secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"]},
            "local": {"path": str(auth_path)}}


def database_env(database: dict[str, Any]) -> dict[str, str]:
    """A ``database`` block as the server's ``LAKEFS_DATABASE_*`` variables."""
    env = {"LAKEFS_DATABASE_TYPE": database["type"]}
    for section, fields in database.items():
        if isinstance(fields, dict):
            env |= {f"LAKEFS_DATABASE_{section}_{name}".upper(): str(value)
                    for name, value in fields.items()}
    return env


# --- REST calls of a region ---------------------------------------------------------------
def _expect(response: httpx.Response, status: int) -> None:
    if response.status_code != status:
        raise AssertionError(f"{response.request.method} {response.request.url}: "
                             f"{response.status_code} {response.text}")


MIRRORS = "/service/replication/v1/repositories"


def create_source(east: Region, repo: str = "src") -> None:
    with east.client() as c:
        r = c.post("/api/v1/repositories", json={"name": repo,
                                                 "storage_namespace": f"local://{repo}"})
        _expect(r, 201)


def upload(region: Region, repo: str, branch: str, path: str, data: bytes) -> None:
    with region.client() as c:
        r = c.post(f"/api/v1/repositories/{repo}/branches/{branch}/objects",
                   params={"path": path}, content=data)
        _expect(r, 201)


def commit(region: Region, repo: str, branch: str, message: str) -> str:
    with region.client() as c:
        r = c.post(f"/api/v1/repositories/{repo}/branches/{branch}/commits",
                   json={"message": message})
        _expect(r, 201)
        return str(r.json()["id"])


def create_mirror(east: Region, repo: str = "src", name: str = "src-mirror",
                  namespace: str = "local://src-mirror", storage_id: str = ""
                  ) -> dict[str, Any]:
    body = {"name": name, "region": "west", "storage_namespace": namespace}
    with east.client() as c:
        r = c.post(f"{MIRRORS}/{repo}/mirrors",
                   json=body | ({"storage_id": storage_id} if storage_id else {}))
        _expect(r, 201)
        return dict(r.json())


def mirror_head(west: Region, repo: str, branch: str) -> str | None:
    try:
        return west.graveler.get_branch(repo, branch).commit_id or None
    except Exception:  # noqa: BLE001 - not there yet
        return None
