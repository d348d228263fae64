"""A deployment of real processes on loopback: ``east`` (source), ``west`` and, with
three regions, ``north`` (another destination, or the source of other repositories).

Each region runs ``python -m lakefs_core run`` and one or more
``python -m replication run`` replicas, each with its own config file under
``<root>/<region>/``. What backs them is chosen by :class:`ClusterSpec`:

- refstore (each server's metadata): SQLite in the region's data directory, or a
  PostgreSQL database per region;
- storage, per region (the two may differ: a mirror across clouds): a local
  directory, an S3 bucket on a moto server, an Azure container on Azurite, or a Cloud
  Storage bucket on gcp-storage-emulator, each emulator a process of its region;
- mirrors table: SQLite (one file both regions share), PostgreSQL, or DynamoDB on a
  moto server of its own;
- object replication: the sidecar's ``builtin`` copier (reading through the source
  API, or ``builtin-direct`` reading the source store), or ``native``, where nothing
  copies until the test runs a replicator from :mod:`e2e.crr` (the same local or S3
  storage in both regions only: it stands in for S3 bucket replication);
- the replication user the sidecars act as: seed 003's ``narrow`` policy (for the
  spec's one source repository and mirror) or its ``broad`` one, created in both
  regions with the same key pair once the servers are up; ``admin`` only on request.

PostgreSQL comes from ``lakefs_testing.servers`` (the installed server binaries); the caller
may pass a running one (the pytest session's), else the cluster starts its own.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from e2e.api import RegionClient
from e2e.processes import ManagedProcess, start_all, stop_all
from lakefs_testing.replication_user import (
    ReplicationUser,
    builtin_copier_policy,
    narrow_replication_policy,
)

if TYPE_CHECKING:
    from lakefs_testing.servers import PostgresServer
    from mirrors_db.table import MirrorsTable

SOURCE, DESTINATION = "east", "west"
REGIONS = (SOURCE, DESTINATION)
#: the third region of a three-region cluster
THIRD = "north"
#: the regions of a cluster, in order: the first ``ClusterSpec.regions`` of these
ALL_REGIONS = (SOURCE, DESTINATION, THIRD)
ORGANIZATION = "e2e"
#: the admin of both installations (the operator: tests and tools act as it)
ACCESS_KEY_ID = "AKIAIOSFODNN7E2EADMIN"
SECRET_ACCESS_KEY = "e2e/Secret+Access/Key/For/Loopback/Only"
#: credentials moto accepts (any will do)
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}

MirrorsDb = Literal["sqlite", "postgres", "dynamodb"]
Refstore = Literal["local", "postgres", "dynamodb"]
Storage = Literal["local", "s3", "azure", "gs"]
STORAGES: tuple[Storage, ...] = ("local", "s3", "azure", "gs")
Replication = Literal["builtin", "builtin-direct", "native"]
#: whom the sidecars act as: a user with seed 003's narrow or broad policy, or the admin
Policy = Literal["narrow", "broad", "admin"]
POLICIES: tuple[Policy, ...] = ("narrow", "broad", "admin")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    from lakefs_testing.servers import free_port as _free_port

    return _free_port()


@dataclass(frozen=True)
class ClusterSpec:
    """What the two regions run on.

    Attributes:
        mirrors_db: backend of the shared mirrors table.
        refstore: each server's metadata database (lakeFS's ``database.type``): an
            SQLite file, a PostgreSQL database, or a DynamoDB table (on the moto server
            of the DynamoDB mirrors table, the auth store in an SQLite file beside it).
        storage: the source region's blockstore, and the destination's unless
            ``west_storage`` says otherwise.
        west_storage: the destination region's blockstore, when it differs.
        replication: who copies object data between the regions.
        sidecars_per_region: replication replicas per region (the server talks to
            the first; the others find work by polling and take leases).
        interval: the sidecars' sensing and mirrors-manager interval.
        log_level: the processes' log level.
        policy: the replication user's policy (``admin``: the sidecars act as the admin).
        source_repository: the source repository the ``narrow`` policy names.
        mirror_repository: the mirror (repository name) the ``narrow`` policy names.
        range_cache_bytes: the bound on the parsed ranges kept in memory by each server
            (``committed.sstable.memory.cache_size_bytes``) and each replication
            service (``validator.range_cache_size_bytes``); None: their defaults.
        regions: 2 (``east``, ``west``) or 3 (and ``north``, on the source region's
            storage); every sidecar knows every other region (``dst_endpoints``).
        also_mirrored: more (source repository, mirror name, destination region) the
            ``narrow`` policy names, beside ``source_repository`` mirrored as
            ``mirror_repository`` into every region but ``east``.
    """

    mirrors_db: MirrorsDb = "sqlite"
    refstore: Refstore = "local"
    storage: Storage = "local"
    west_storage: Storage | None = None
    replication: Replication = "builtin"
    sidecars_per_region: int = 1
    interval: str = "1s"
    log_level: str = "INFO"
    policy: Policy = "narrow"
    source_repository: str = "src"
    mirror_repository: str = "src-mirror"
    range_cache_bytes: int | None = None
    regions: int = 2
    also_mirrored: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.regions not in (2, 3):
            raise ValueError(f"{self.regions} regions: a cluster has 2 or 3")
        for storage in (self.storage, self.west_storage):
            if storage is not None and storage not in STORAGES:
                raise ValueError(f"unknown storage {storage!r}: one of {', '.join(STORAGES)}")
        same = self.storage_of(DESTINATION) == self.storage
        if self.replication == "native" and not (same and self.storage in ("local", "s3")):
            raise ValueError(
                f"native replication needs S3 (or local) storage in both regions, got "
                f"{self.storage_label}: S3 bucket replication copies only between S3 "
                "buckets; mirror across stores with the builtin copier "
                "(builtin or builtin-direct)")

    @property
    def region_names(self) -> tuple[str, ...]:
        """The cluster's regions, the source region first."""
        return ALL_REGIONS[:self.regions]

    def storage_of(self, region: str) -> Storage:
        """The blockstore of ``region``."""
        if region == DESTINATION and self.west_storage is not None:
            return self.west_storage
        return self.storage

    @property
    def storage_label(self) -> str:
        """``s3`` when both regions store alike, else ``<east>,<west>`` (``s3,azure``)."""
        west = self.storage_of(DESTINATION)
        return self.storage if west == self.storage else f"{self.storage},{west}"

    @property
    def needs_postgres(self) -> bool:
        return "postgres" in (self.mirrors_db, self.refstore)

    def replication_user(self, mirror_namespace: str,
                         namespace_bases: Mapping[str, str] | None = None
                         ) -> ReplicationUser | None:
        """The user the sidecars act as (None: the admin).

        Args:
            mirror_namespace: the storage namespace of ``mirror_repository`` in ``west``.
            namespace_bases: per region, what its namespaces are under (``local://``):
                needed when the narrow policy names more than that one mirror.
        """
        if self.policy == "admin":
            return None
        builtin = self.replication == "builtin"
        user = ReplicationUser.documented(
            self.policy, source=self.source_repository, mirror=self.mirror_repository,
            namespace=mirror_namespace, builtin_copier=builtin)
        if self.policy != "narrow" or (self.regions == 2 and not self.also_mirrored):
            return user
        # one narrow policy naming every source, mirror and mirror namespace
        bases = namespace_bases or {}
        named = [(self.source_repository, self.mirror_repository, region)
                 for region in self.region_names[1:]] + list(self.also_mirrored)
        documents = []
        for source, mirror, region in named:
            documents.append(narrow_replication_policy(
                source, mirror, bases.get(region, "") + mirror))
            if builtin:
                documents.append(builtin_copier_policy(source))
        merged: dict[str, dict[str, Any]] = {}
        for doc in documents:
            into = merged.setdefault(doc["id"], {"id": doc["id"], "statement": []})
            into["statement"] += [s for s in doc["statement"] if s not in into["statement"]]
        return replace(user, policies=tuple(merged.values()))

    def describe(self) -> str:
        regions = "" if self.regions == 2 else f"{self.regions} regions, "
        return (f"{regions}mirrors table {self.mirrors_db}, refstore {self.refstore}, storage "
                f"{self.storage_label}, replication {self.replication}, "
                f"{self.sidecars_per_region} sidecar(s) per region, replication user "
                f"{self.policy}")


@dataclass
class Region:
    """One region: its server, its sidecar replicas, its storage."""

    name: str
    root: Path
    server_port: int
    server: ManagedProcess
    sidecars: list[ManagedProcess]
    sidecar_ports: list[int]
    blockstore: dict[str, Any]
    storage: Storage = "local"
    #: what a namespace is under in this region's store (``s3://east-data/``)
    namespace_base: str = "local://"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def sidecar_endpoint(self, replica: int = 0) -> str:
        return f"http://127.0.0.1:{self.sidecar_ports[replica]}"

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self.server, *self.sidecars]

    @property
    def blockstore_root(self) -> Path:
        """Root of the local blockstore (``local://x`` is ``<root>/x``)."""
        return self.root / "blockstore"

    def client(self, timeout: float = 30.0) -> RegionClient:
        return RegionClient(self.endpoint, ACCESS_KEY_ID, SECRET_ACCESS_KEY, timeout=timeout)

    def namespace(self, name: str) -> str:
        """A storage namespace for repository ``name`` in this region's store."""
        return f"{self.namespace_base}{name}"

    def kill(self) -> None:
        """``kill -9`` the whole region: server and every sidecar."""
        for p in self.processes:
            p.kill()

    def start(self, timeout: float = 90.0) -> None:
        """Start every process of the region that is not running."""
        start_all([p for p in self.processes if not p.alive], timeout)


@dataclass
class Cluster:
    """A running two-region deployment (see :func:`start_cluster`)."""

    spec: ClusterSpec
    root: Path
    regions: dict[str, Region]
    aux: list[ManagedProcess] = field(default_factory=list)
    s3_endpoints: dict[str, str] = field(default_factory=dict)
    #: per region on Azure, Azurite's endpoint; per region on Cloud Storage, the emulator's
    azure_endpoints: dict[str, str] = field(default_factory=dict)
    gs_endpoints: dict[str, str] = field(default_factory=dict)
    mirrors_database: dict[str, Any] = field(default_factory=dict)
    #: the user the sidecars act as (None: the admin)
    replication_user: ReplicationUser | None = None

    @property
    def east(self) -> Region:
        return self.regions[SOURCE]

    @property
    def west(self) -> Region:
        return self.regions[DESTINATION]

    @property
    def north(self) -> Region:
        """The third region (three-region clusters only)."""
        return self.regions[THIRD]

    @property
    def processes(self) -> list[ManagedProcess]:
        return [p for r in self.regions.values() for p in r.processes] + self.aux

    def s3_client(self, region: str) -> Any:
        """A boto3 S3 client of ``region``'s moto server (storage ``s3`` only)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.s3_endpoints[region],
                            region_name=AWS_ENV["AWS_DEFAULT_REGION"],
                            aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"])

    def kill_region(self, name: str) -> None:
        """``kill -9`` a whole region: its server, its sidecars and its object store."""
        self.regions[name].kill()
        for p in self.aux:
            if p.name.startswith(f"{name}-"):
                p.kill()

    def open_mirrors_table(self) -> MirrorsTable:
        """The shared mirrors table, opened in this process (the caller closes it)."""
        from mirrors_db import open_mirrors_table
        from mirrors_db.config import MirrorsDatabaseConfig

        return open_mirrors_table(MirrorsDatabaseConfig.model_validate(self.mirrors_database))

    def stop(self) -> None:
        """Stop every process (sidecars first, so they release their leases)."""
        sidecars = [p for r in self.regions.values() for p in r.sidecars]
        stop_all(sidecars)
        stop_all([r.server for r in self.regions.values()])
        stop_all(self.aux)


def parse_storage(value: str) -> tuple[Storage, Storage | None]:
    """``--storage`` as the tools take it: ``s3`` (both regions) or ``s3,azure`` (the
    source region on S3, the destination on Azure): ``(storage, west_storage)``.

    Raises:
        ValueError: not one or two known storages.
    """
    names = [v.strip() for v in value.split(",")]
    unknown = [n for n in names if n not in STORAGES]
    if unknown or len(names) > len(REGIONS):
        raise ValueError(f"{value!r}: expected a storage ({'|'.join(STORAGES)}) or "
                         f"two of them, the source region's and the destination's "
                         f"(s3,azure)")
    east: Storage = names[0]  # type: ignore[assignment]
    west: Storage | None = names[1] if len(names) > 1 else None  # type: ignore[assignment]
    return east, (None if west == east else west)


# --------------------------------------------------------------------------- configs
def _bucket(region: str) -> str:
    """The bucket (or container) holding ``region``'s namespaces."""
    return f"{region}-data"


def _namespace_base(storage: Storage, region: str, endpoint: str | None) -> str:
    if storage == "local":
        # the mirrors table keeps a storage namespace to one mirror, whatever its region:
        # the third region's local namespaces are under a prefix of their own, so a
        # repository mirrored to west and north may carry the same name in both
        return "local://" if region in REGIONS else f"local://{region}/"
    if storage == "azure":
        from lakefs_testing.azurite import AZURITE_ACCOUNT

        return f"{endpoint}/{AZURITE_ACCOUNT}/{_bucket(region)}/"
    return f"{storage}://{_bucket(region)}/"


def _blockstore(storage: Storage, root: Path, endpoint: str | None) -> dict[str, Any]:
    if storage == "local":
        return {"type": "local", "local": {"path": str(root / "blockstore")}}
    if storage == "azure":
        from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY

        return {"type": "azure", "azure": {
            "storage_account": AZURITE_ACCOUNT, "storage_access_key": AZURITE_KEY,
            "test_endpoint_url": endpoint}}
    if storage == "gs":
        return {"type": "gs", "gs": {"endpoint": endpoint, "anonymous": True}}
    return {"type": "s3", "s3": {
        "region": AWS_ENV["AWS_DEFAULT_REGION"], "endpoint": endpoint,
        "force_path_style": True,
        "credentials": {"access_key_id": AWS_ENV["AWS_ACCESS_KEY_ID"],
                        "secret_access_key": AWS_ENV["AWS_SECRET_ACCESS_KEY"]}}}


def _database(refstore: Refstore, root: Path, *, postgres_url: str | None,
              dynamodb_url: str | None, table: str) -> dict[str, Any]:
    """One region's ``database`` block, for its server and (``refstore_database``) its
    sidecars alike."""
    local = {"path": str(root / "metadata.db")}
    if refstore == "postgres":
        return {"type": "postgres", "postgres": {"connection_string": postgres_url}}
    if refstore == "dynamodb":
        return {"type": "dynamodb", "local": local, "dynamodb": {
            "table_name": table, "endpoint": dynamodb_url,
            "aws_region": AWS_ENV["AWS_DEFAULT_REGION"]}}
    return {"type": "local", "local": local}


def server_config(*, port: int, root: Path, database: dict[str, Any],
                  blockstore: dict[str, Any], sidecar_port: int, secret_key: str,
                  log_level: str = "INFO",
                  range_cache_bytes: int | None = None) -> dict[str, Any]:
    """The YAML settings of one region's ``lakefs_core`` server."""
    committed = ({} if range_cache_bytes is None else {"committed": {"sstable": {
        "memory": {"cache_size_bytes": range_cache_bytes}}}})
    return {
        "listen_address": f"127.0.0.1:{port}",
        "data_dir": str(root),
        "database": database,
        "blockstore": blockstore,
        "auth": {"encrypt": {"secret_key": secret_key}},
        "installation": {"user_name": "admin", "access_key_id": ACCESS_KEY_ID,
                         "secret_access_key": SECRET_ACCESS_KEY},
        "replication": {"endpoint": f"http://127.0.0.1:{sidecar_port}"},
        "logging": {"level": log_level},
        **committed,
    }


def sidecar_config(*, region: str, port: int, endpoints: dict[str, str],
                   database: dict[str, Any], blockstore: dict[str, Any],
                   mirrors_database: dict[str, Any], secret_key: str, mode: Replication,
                   other_blockstores: Mapping[str, dict[str, Any]], interval: str,
                   credentials: tuple[str, str], log_level: str = "INFO",
                   range_cache_bytes: int | None = None) -> dict[str, Any]:
    """The YAML settings of one ``replication`` replica of ``region``.

    Args:
        endpoints: every region's server, this one's included (the others are its
            ``dst_endpoints``).
        other_blockstores: every other region's blockstore (``builtin-direct`` reads
            the sources' objects through them).
    """
    others = [r for r in endpoints if r != region]
    builtin: dict[str, Any] = {"concurrency": 4, "retries": 2}
    if mode == "builtin-direct":
        builtin["source_blockstores"] = {o: other_blockstores[o] for o in others}
    return {
        "region": region,
        "organization_id": ORGANIZATION,
        "regional_endpoint": endpoints[region],
        "dst_endpoints": {o: endpoints[o] for o in others},
        "listen_address": f"127.0.0.1:{port}",
        "mirrors_database": mirrors_database,
        "refstore_database": database,
        "blockstore": blockstore,
        "auth": {"encrypt": {"secret_key": secret_key}},
        "source_lakefs": {"access_key_id": credentials[0],
                          "secret_access_key": credentials[1]},
        "commit_sensor": {"process_branches_duration": interval},
        "mirrors_manager": {"process_mirrors_interval_duration": interval},
        "validator": {"run_interval": interval, "cooldown_on_error": "1s",
                      "cooldown_on_missing": "5s", "missing_recheck_interval": "200ms",
                      **({} if range_cache_bytes is None else {
                          "range_cache_size_bytes": range_cache_bytes})},
        "object_replication": {"mode": "native" if mode == "native" else "builtin",
                               "builtin": builtin},
        "logging": {"level": log_level, "format": "text"},
    }


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    """Write a config file readable by its owner only (it holds keys and secrets)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(yaml.safe_dump(data, sort_keys=False))
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_TRUNC
    return path


def _libpq(url: str) -> str:
    """``postgresql+psycopg://...`` (what lakefs_testing.servers returns) as a libpq URI."""
    return "postgresql://" + url.partition("://")[2]


def _moto(name: str, root: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    proc = ManagedProcess(name, ["python", "-m", "lakefs_testing.moto_server", "-H",
                                 "127.0.0.1", "-p", str(port)], root / f"{name}.log",
                          ready_url=f"http://127.0.0.1:{port}/moto-api/", env=AWS_ENV)
    return proc, f"http://127.0.0.1:{port}"


def _azurite(name: str, root: Path) -> tuple[ManagedProcess, str]:
    """Azurite's blob service for one region, its data under ``root`` (kept across a
    ``kill -9`` and restart, as a cloud's would be)."""
    from lakefs_testing.azurite import AZURITE_ACCOUNT, azurite_command

    port = free_port()
    proc = ManagedProcess(name, azurite_command(port, root / name), root / f"{name}.log",
                          ready_url=f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list")
    return proc, f"http://127.0.0.1:{port}"


def _gcs(name: str, root: Path) -> tuple[ManagedProcess, str]:
    """The Cloud Storage emulator for one region, its buckets in files under ``root``
    (kept across a ``kill -9`` and restart)."""
    from lakefs_testing.gcs import emulator_command

    port = free_port()
    data = root / name
    data.mkdir(parents=True, exist_ok=True)
    proc = ManagedProcess(name, emulator_command(port, data, in_memory=False),
                          root / f"{name}.log", ready_url=f"http://127.0.0.1:{port}/",
                          cwd=data)
    return proc, f"http://127.0.0.1:{port}"


def _create_bucket(storage: Storage, region: str, blockstore: dict[str, Any],
                   cluster: Cluster) -> None:
    """Create ``region``'s bucket (container) in its store."""
    if storage == "s3":
        cluster.s3_client(region).create_bucket(Bucket=_bucket(region))
    elif storage == "azure":
        from lakefs_core.block.azure import AzureBlobStore
        from lakefs_core.block.config import AzureConfig

        azure = AzureBlobStore(AzureConfig.model_validate(blockstore["azure"]))
        try:
            azure.service.create_container(_bucket(region))
        finally:
            azure.close()
    elif storage == "gs":
        from lakefs_core.block.config import GSConfig
        from lakefs_core.block.gs import GSBlockStore

        gs = GSBlockStore(GSConfig.model_validate(blockstore["gs"]))
        try:
            gs.client.create_bucket(_bucket(region))
        finally:
            gs.close()


def cut_reader(table: MirrorsTable, group_id: str
               ) -> Callable[[int], list[tuple[int, dict[str, str]]]]:
    """The cuts of a group the table keeps after a sequence number, as the I8 checker
    reads them (:data:`e2e.invariants.CutReader`)."""
    def read(after: int) -> list[tuple[int, dict[str, str]]]:
        return [(c.sequence, {m.mirror_id: cid for m, cid in c.heads.items()})
                for c in table.list_cuts(ORGANIZATION, group_id, after=after)]

    return read


def _prepare_mirrors_table(config: dict[str, Any]) -> None:
    """Create the table (and its schema) once, before several sidecars race to."""
    from mirrors_db import open_mirrors_table
    from mirrors_db.config import MirrorsDatabaseConfig

    table = open_mirrors_table(MirrorsDatabaseConfig.model_validate(config))
    table.close()


@contextlib.contextmanager
def start_cluster(root: Path, spec: ClusterSpec = ClusterSpec(), *,
                  postgres: PostgresServer | None = None,
                  ports: Mapping[str, tuple[int, Sequence[int]]] | None = None,
                  secret_key: str | None = None) -> Iterator[Cluster]:
    """Start every region (and the moto / PostgreSQL servers the spec needs).

    Args:
        root: directory for data, configs and logs (``<root>/<region>/*.log``).
        spec: what to run on.
        postgres: a running PostgreSQL to create databases in; without one, a
            throwaway cluster is started when the spec needs PostgreSQL.
        ports: per region, the server's port and the sidecar replicas' ports; free
            ports by default.
        secret_key: ``auth.encrypt.secret_key`` of every region (random by default;
            give the same one again to restart over the same data).

    Yields:
        The running cluster; on exit every process is stopped.
    """
    for key, value in AWS_ENV.items():
        os.environ.setdefault(key, value)  # for the boto3 clients of this process
    names = spec.region_names
    with contextlib.ExitStack() as stack:
        tag = secrets.token_hex(4)
        if spec.needs_postgres and postgres is None:
            from lakefs_testing.servers import start_postgres

            postgres = start_postgres()
            stack.callback(postgres.stop)
        cluster = Cluster(spec=spec, root=root, regions={})
        stack.callback(cluster.stop)
        # object stores and the DynamoDB tables' server
        for name in names:
            storage = spec.storage_of(name)
            if storage == "s3":
                proc, url = _moto(f"{name}-s3", root / name)
                cluster.s3_endpoints[name] = url
            elif storage == "azure":
                proc, url = _azurite(f"{name}-azure", root / name)
                cluster.azure_endpoints[name] = url
            elif storage == "gs":
                proc, url = _gcs(f"{name}-gs", root / name)
                cluster.gs_endpoints[name] = url
            else:
                continue
            cluster.aux.append(proc)
        dynamo_url = None
        if "dynamodb" in (spec.mirrors_db, spec.refstore):
            proc, dynamo_url = _moto("dynamodb", root)
            cluster.aux.append(proc)
        start_all(cluster.aux)
        store_endpoints = {**cluster.s3_endpoints, **cluster.azure_endpoints,
                           **cluster.gs_endpoints}
        blockstores = {n: _blockstore(spec.storage_of(n), root / n, store_endpoints.get(n))
                       for n in names}
        for name in names:
            _create_bucket(spec.storage_of(name), name, blockstores[name], cluster)
        namespace_base = {n: _namespace_base(spec.storage_of(n), n, store_endpoints.get(n))
                          for n in names}
        # the mirrors table
        if spec.mirrors_db == "sqlite":
            mirrors: dict[str, Any] = {"type": "sqlite",
                                       "sqlite": {"path": str(root / "mirrors.db")}}
        elif spec.mirrors_db == "postgres":
            assert postgres is not None
            url = _libpq(postgres.create_database(f"e2e_{tag}_mirrors"))
            mirrors = {"type": "postgres", "postgres": {"connection_string": url}}
        else:
            mirrors = {"type": "dynamodb", "dynamodb": {
                "table_name": f"mirrors-{tag}", "aws_region": AWS_ENV["AWS_DEFAULT_REGION"],
                "endpoint_url": dynamo_url}}
        root.mkdir(parents=True, exist_ok=True)
        _prepare_mirrors_table(mirrors)
        cluster.mirrors_database = mirrors
        # the regions
        secret_key = secret_key or secrets.token_urlsafe(24)
        if ports is None:
            ports = {n: (free_port(), [free_port() for _ in range(spec.sidecars_per_region)])
                     for n in names}
        server_ports = {n: ports[n][0] for n in names}
        sidecar_ports = {n: list(ports[n][1]) for n in names}
        endpoints = {n: f"http://127.0.0.1:{server_ports[n]}" for n in names}
        user = spec.replication_user(namespace_base[DESTINATION] + spec.mirror_repository,
                                     namespace_base)
        cluster.replication_user = user
        credentials = ((user.access_key_id, user.secret_access_key) if user is not None
                       else (ACCESS_KEY_ID, SECRET_ACCESS_KEY))
        for name in names:
            region_root = root / name
            db_url = None
            if spec.refstore == "postgres":
                assert postgres is not None
                db_url = _libpq(postgres.create_database(f"e2e_{tag}_{name}"))
            database = _database(spec.refstore, region_root, postgres_url=db_url,
                                 dynamodb_url=dynamo_url, table=f"metadata-{tag}-{name}")
            server_path = _write_yaml(region_root / "lakefs.yaml", server_config(
                port=server_ports[name], root=region_root, database=database,
                blockstore=blockstores[name], sidecar_port=sidecar_ports[name][0],
                secret_key=secret_key, log_level=spec.log_level,
                range_cache_bytes=spec.range_cache_bytes))
            server = ManagedProcess(
                f"{name}-server", ["python", "-m", "lakefs_core", "run", "--config",
                                   str(server_path)],
                region_root / "server.log", ready_url=f"{endpoints[name]}/_health",
                env=AWS_ENV)
            sidecars = []
            for i, port in enumerate(sidecar_ports[name]):
                path = _write_yaml(region_root / f"replication-{i}.yaml", sidecar_config(
                    region=name, port=port, endpoints=endpoints, database=database,
                    blockstore=blockstores[name], mirrors_database=mirrors,
                    secret_key=secret_key, mode=spec.replication,
                    other_blockstores=blockstores, interval=spec.interval,
                    credentials=credentials, log_level=spec.log_level,
                    range_cache_bytes=spec.range_cache_bytes))
                sidecars.append(ManagedProcess(
                    f"{name}-sidecar-{i}", ["python", "-m", "replication", "run", "--config",
                                            str(path)],
                    region_root / f"sidecar-{i}.log",
                    ready_url=f"http://127.0.0.1:{port}/_health", env=AWS_ENV))
            cluster.regions[name] = Region(
                name, region_root, server_ports[name], server, sidecars, sidecar_ports[name],
                blockstores[name], storage=spec.storage_of(name),
                namespace_base=namespace_base[name])
        # servers first: the sidecars read the auth tables (and the DynamoDB metadata
        # table) the servers create; the admin creates the replication user in every
        # region while the sidecars boot (long before their first call to a server)
        start_all([r.server for r in cluster.regions.values()])
        sidecars = [p for r in cluster.regions.values() for p in r.sidecars]
        for p in sidecars:
            p.spawn()
        if user is not None:
            with ThreadPoolExecutor(len(names)) as pool:
                list(pool.map(lambda r: user.create_through_api(
                    r.endpoint, ACCESS_KEY_ID, SECRET_ACCESS_KEY), cluster.regions.values()))
        for p in sidecars:
            p.wait_ready()
        yield cluster


@contextlib.contextmanager
def scratch_dir(keep: Path | None = None, prefix: str = "lakefs-e2e-") -> Iterator[Path]:
    """``keep`` if given (left in place), else a temporary directory removed afterwards."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
