"""Two regions in one test process: two servers, two sidecars, one mirrors table.

Each region has its own data directory (SQLite refstore and auth tables, local
blockstore root). The servers and sidecars are real (uvicorn on loopback); the
sidecars share one mirrors table. Object replication is ``builtin`` (the sidecar
copies), or ``native`` with :class:`FaultyReplicator` standing in for the store's
own replication (delays, reordering, dropped and duplicated copies).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml

from lakefs_core.graveler.graveler import Graveler
from replication.api import create_app as create_sidecar_app
from replication.config import load_replication_config
from replication.sidecar import Sidecar
from tests.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer, live_server
from tests.servers import free_port

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
        config = load_replication_config(str(self.config_path), env={})
        sidecar = Sidecar(config)
        sidecar.start()
        port = port or (self.sidecar_port if not self.sidecars else free_port())
        server = uvicorn.Server(uvicorn.Config(create_sidecar_app(sidecar), host="127.0.0.1",
                                               port=port, log_level="warning",
                                               access_log=False))
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
                       mode: str, other_root: Path, interval: str) -> dict[str, Any]:
    builtin: dict[str, Any] = {"concurrency": 4, "retries": 2}
    if mode == "builtin-direct":
        builtin["source_blockstores"] = {
            other: {"type": "local", "local": {"path": str(other_root / "blockstore")}}}
    return {
        "region": region,
        "organization_id": ORG,
        "regional_endpoint": own_endpoint,
        "dst_endpoints": {other: other_endpoint},
        "listen_address": f"127.0.0.1:{port}",
        "mirrors_database": mirrors_database,
        "refstore_database": {"type": "local", "local": {"path": str(root / "metadata.db")}},
        "blockstore": {"type": "local", "local": {"path": str(root / "blockstore")}},
        "auth": {"encrypt": {"secret_key": SECRET_KEY}},
        "source_lakefs": {"access_key_id": ADMIN_KEY, "secret_access_key": ADMIN_SECRET},
        "commit_sensor": {"process_branches_duration": interval},
        "mirrors_manager": {"process_mirrors_interval_duration": interval},
        "validator": {"cooldown_on_error": "1s", "cooldown_on_missing": "5s",
                      "missing_recheck_interval": "200ms"},
        "object_replication": {"mode": "native" if mode == "native" else "builtin",
                               "builtin": builtin},
    }


@contextlib.contextmanager
def two_regions(tmp: Path, mirrors_database: dict[str, Any], *, mode: str = "builtin",
                interval: str = "2s", sidecars: bool = True) -> Iterator[tuple[Region, Region]]:
    """Regions "east" (source) and "west" (destination), servers and sidecars running."""
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
            server = stack.enter_context(live_server(str(roots[n]), env,
                                                     port=server_ports[n]))
            cfg = replication_config(
                n, roots[n], other, f"http://127.0.0.1:{server_ports[other]}",
                f"http://127.0.0.1:{server_ports[n]}", sidecar_ports[n], mirrors_database,
                mode, roots[other], interval)
            path = roots[n] / "replication.yaml"
            path.write_text(yaml.safe_dump(cfg))
            regions[n] = Region(n, roots[n], server, sidecar_ports[n], path)
        try:
            if sidecars:
                for r in regions.values():
                    r.start_sidecar()
            yield regions["east"], regions["west"]
        finally:
            for r in regions.values():
                r.stop_sidecars()


class FaultyReplicator:
    """Copies a source namespace's files to a destination namespace like S3 CRR would,
    but badly: random delay, random order, temporarily dropped and duplicated copies.

    ``run_once()`` does one pass; ``start()`` runs passes in a thread until ``stop()``.
    """

    def __init__(self, src_dir: Path, dst_dir: Path, *, seed: int = 0, drop: float = 0.3,
                 duplicate: float = 0.2, max_delay: float = 0.05,
                 hold: Callable[[str], bool] | None = None) -> None:
        self.src_dir = src_dir
        self.dst_dir = dst_dir
        self.rng = random.Random(seed)
        self.drop = drop
        self.duplicate = duplicate
        self.max_delay = max_delay
        self.hold = hold or (lambda _rel: False)
        self.copied: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pending(self) -> list[str]:
        out = []
        for dirpath, _dirs, files in os.walk(self.src_dir):
            for name in files:
                if name.startswith(".tmp-") or name.startswith("."):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), self.src_dir)
                if not (self.dst_dir / rel).exists():
                    out.append(rel)
        return out

    def _copy(self, rel: str) -> None:
        dst = self.dst_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.parent / f".tmp-crr-{self.rng.random()}"
        shutil.copyfile(self.src_dir / rel, tmp)
        os.replace(tmp, dst)
        self.copied.append(rel)

    def run_once(self) -> int:
        todo = self.pending()
        self.rng.shuffle(todo)
        n = 0
        for rel in todo:
            if self.hold(rel) or self.rng.random() < self.drop:
                continue  # dropped this time; a later pass copies it
            time.sleep(self.rng.random() * self.max_delay)
            self._copy(rel)
            n += 1
            if self.rng.random() < self.duplicate:
                self._copy(rel)
        return n

    def drain(self) -> None:
        """Copy everything not held (no faults)."""
        for rel in self.pending():
            if not self.hold(rel):
                self._copy(rel)

    def start(self, period: float = 0.05) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.run_once()
                self._stop.wait(period)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition", check: Callable[[], None] | None = None) -> Any:
    """Poll until ``predicate()`` is truthy, running ``check()`` (invariants) each time."""
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)
