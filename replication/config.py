"""Settings of the replication sidecar (every field of its configuration reference).

Read from an optional YAML file (the Helm chart renders ``replication.config`` into
one), then from ``REPLICATION_``-prefixed environment variables named after the
field path (``REPLICATION_REGION``, ``REPLICATION_MIRRORS_DATABASE_DYNAMODB_TABLE_NAME``,
``REPLICATION_COMMIT_SENSOR_PROCESS_BRANCHES_DURATION``), and finally from the keys of
the replication Kubernetes secret, which the chart injects as environment variables
under their own names: ``source_lakefs_access_key_id``,
``source_lakefs_secret_access_key`` and ``auth_encrypt_secret_key``. The prefixed
names win over the secret's, and both win over the file.

Durations accept Go-style strings (``20s``, ``1m``, ``1h30m``, ``500ms``) or seconds
and are timedelta values.

Example:
    >>> cfg = load_replication_config("replication.yaml")  # doctest: +SKIP
    >>> cfg.commit_sensor.process_branches_duration
    datetime.timedelta(seconds=60)
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, Discriminator, Field, SecretStr, Tag, model_validator

from lakefs_core.block.config import BlockstoreConfig, BlockstoresConfig
from lakefs_core.config import (
    SERVER_CONFIG_FILE_ENV,
    AuthApiConfig,
    AuthCacheConfig,
    DatabaseConfig,
    LoggingConfig,
    load_server_config,
)
from lakefs_core.graveler.ranges import DEFAULT_RANGE_CACHE_BYTES
from lakefs_core.settings import (
    ConfigError,
    ConfigFieldError,
    ConfigModel,
    Duration,
    FieldValueError,
    HttpEndpoint,
    ListenAddress,
    PrefixedSettings,
    check_blockstore_sections,
    load_settings,
    plain_dict,
)
from mirrors_db.config import MirrorsDatabaseConfig
from mirrors_db.models import MAX_PAGE_SIZE

__all__ = [
    "REPLICATION_CONFIG_FILE_ENV",
    "REPLICATION_ENV_PREFIX",
    "SECRET_ENV_VARS",
    "BuiltinCopierConfig",
    "CommitSensorConfig",
    "LakeFSCredentials",
    "MirrorsDatabaseSettings",
    "MirrorsManagerConfig",
    "ObjectReplicationConfig",
    "ReplicationAuthCacheConfig",
    "ReplicationAuthConfig",
    "ReplicationConfig",
    "ReplicationEncryptConfig",
    "ValidatorConfig",
    "load_replication_config",
]

REPLICATION_ENV_PREFIX = "REPLICATION_"
#: Environment variable naming the config file when no path is given explicitly.
REPLICATION_CONFIG_FILE_ENV = "REPLICATION_CONFIG_FILE"
#: Keys of the replication Kubernetes secret, read un-prefixed from the
#: environment, and the settings they fill.
SECRET_ENV_VARS: Mapping[str, tuple[str, ...]] = {
    "source_lakefs_access_key_id": ("source_lakefs", "access_key_id"),
    "source_lakefs_secret_access_key": ("source_lakefs", "secret_access_key"),
    "auth_encrypt_secret_key": ("auth", "encrypt", "secret_key"),
}


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be greater than zero, such as '20s' or '1m'")
    return value


#: An interval: a duration strictly greater than zero.
Interval = Annotated[Duration, AfterValidator(_positive)]


# --- mirrors database --------------------------------------------------------------
class MirrorsDatabaseSettings(MirrorsDatabaseConfig):
    """``mirrors_database``: the table the sidecars of every region coordinate through.

    The mirrors_db package's own config model (``type`` dynamodb | postgres | sqlite,
    and the section of that name), so ``open_mirrors_table`` takes it as it is.
    """

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of the section (see :func:`lakefs_core.config.plain_dict`)."""
        return plain_dict(self)


# --- credentials and auth ------------------------------------------------------------------
class LakeFSCredentials(ConfigModel):
    """The replication user's lakeFS access key, the same on every installation.

    Attributes:
        access_key_id: the replication user's access key id.
        secret_access_key: its secret access key.
    """

    access_key_id: SecretStr
    secret_access_key: SecretStr


class ReplicationEncryptConfig(ConfigModel):
    """``auth.encrypt``: required here, unlike on an embedded server."""

    secret_key: SecretStr = Field(description="must match the lakeFS auth.encrypt.secret_key")


class ReplicationAuthCacheConfig(AuthCacheConfig):
    """``auth.cache``: off by default on the sidecar."""

    enabled: bool = False


class ReplicationAuthConfig(ConfigModel):
    """``auth``: the encryption key shared with lakeFS, optional external auth, cache."""

    encrypt: ReplicationEncryptConfig
    api: AuthApiConfig = Field(default_factory=AuthApiConfig)
    cache: ReplicationAuthCacheConfig = Field(default_factory=ReplicationAuthCacheConfig)


# --- workers -------------------------------------------------------------------------
class CommitSensorConfig(ConfigModel):
    """How source branches are scanned for new heads.

    Attributes:
        process_branches_duration: every mirror's source branches and tags are read at
            least this often (ref events from the source region wake a mirror sooner).
        branches_scanner_concurrency_limit: mirrors whose source is read at once.
        list_branch_page_size: page size when listing a source's branches and tags.
        log_commit_page_size: page size when reading a source's commit log.
    """

    process_branches_duration: Interval = timedelta(minutes=1)
    branches_scanner_concurrency_limit: int = Field(default=10, ge=1)
    list_branch_page_size: int = Field(default=1000, ge=1)
    log_commit_page_size: int = Field(default=1000, ge=1)


class MirrorsManagerConfig(ConfigModel):
    """How often mirror repositories are reconciled (created / deleted).

    Attributes:
        process_mirrors_interval_duration: the mirrors manager acts on the mirrors
            table at least this often (its change feed wakes it sooner), and lists
            this region's repositories this often for those of deleted mirrors.
    """

    process_mirrors_interval_duration: Interval = timedelta(seconds=20)


class ValidatorConfig(ConfigModel):
    """How destination commits are validated before a mirror branch moves.

    A new source head is validated as soon as it is seen. A head whose validation
    found pieces missing, or failed, is validated again after its cooldown, at the
    first validation run from then on.

    Attributes:
        run_interval: validation runs are this far apart.
        num_workers: validations at once.
        cooldown_on_missing: after a validation finds pieces missing, the least time
            before that commit is validated again.
        cooldown_on_error: after a validation fails (the destination store answers
            with an error), the least time before it is tried again.
        missing_recheck_interval: extension; while pieces are missing, they are
            rechecked this often, in order, stopping at the first still missing
            (about one request each time; the next time goes on after it, so the
            count in the status comes down as pieces arrive in any order), and the
            commit is validated at once when all have arrived, whatever its
            cooldown. ``0`` turns the rechecks off.
        request_concurrency: extension; store requests (object stats, listings of
            the namespace) one validation makes at once.
        range_cache_size_bytes: extension; most memory that the parsed ranges the
            validations read take, all mirrors together (like the server's
            ``committed.sstable.memory.cache_size_bytes``). A mirror that catches up
            drops its own; ``/metrics`` shows what they hold
            (``replication_range_cache_bytes``).
    """

    run_interval: Interval = timedelta(minutes=1)
    num_workers: int = Field(default=3, ge=1)
    cooldown_on_missing: Duration = timedelta(minutes=1)
    cooldown_on_error: Duration = timedelta(minutes=1)
    missing_recheck_interval: Duration = timedelta(milliseconds=500)
    request_concurrency: int = Field(default=16, ge=1)
    range_cache_size_bytes: int = Field(default=DEFAULT_RANGE_CACHE_BYTES, ge=1_000_000,
                                        le=1 << 40)


def _blockstore_shape(value: Any) -> str:
    """``blockstores`` when a section lists ``stores``, else ``blockstore``."""
    stores = value.get("stores") if isinstance(value, Mapping) else getattr(
        value, "stores", None)
    return "blockstores" if stores is not None else "blockstore"


#: a source region's stores: one ``blockstore`` section, or a ``blockstores`` one
SourceBlockstores = Annotated[
    Annotated[BlockstoreConfig, Tag("blockstore")] | Annotated[BlockstoresConfig,
                                                                Tag("blockstores")],
    Discriminator(_blockstore_shape)]


class BuiltinCopierConfig(ConfigModel):
    """``object_replication.builtin``: the sidecar copies objects itself.

    Attributes:
        concurrency: objects copied at once.
        retries: attempts after the first for one object before it counts as missing
            until the validator's next round.
        source_blockstores: per source region, a blockstore section through which the
            source objects can be read directly: the keys of ``blockstore``, or of
            ``blockstores`` (``stores`` with ids) for a region with several stores,
            where each source repository is read from the store of its storage id;
            a region not listed (or a repository on a store not listed) is read
            through the source lakeFS API (``dst_endpoints``), which works for any pair.
    """

    concurrency: int = Field(default=8, ge=1)
    retries: int = Field(default=5, ge=0)
    source_blockstores: dict[str, SourceBlockstores] = Field(default_factory=dict)


class ObjectReplicationConfig(ConfigModel):
    """Who copies object data: the store's ``native`` replication, or the ``builtin`` copier.

    Attributes:
        mode: ``native`` (the object store replicates, e.g. S3 replication rules) or
            ``builtin`` (this service copies the objects a new commit needs).
    """

    mode: Literal["native", "builtin"] = "native"
    builtin: BuiltinCopierConfig = Field(default_factory=BuiltinCopierConfig)


class LagHistoryConfig(ConfigModel):
    """``lag_history`` (extension): the recent lag of every mirror branch, in memory.

    Every sidecar samples the lag of each branch of the active mirrors whose source or
    destination is its region, from the mirrors table, and serves the samples of the
    last ``window`` (``GET .../mirrors/{id}/lag``), so a status page can chart the
    recent lag as soon as it opens. Memory is bounded: at most ``max_series`` branches,
    ``window / interval`` samples each.

    Attributes:
        interval: samples are this far apart; ``0s`` turns the history off.
        window: how far back samples are kept.
        max_series: branches (over all mirrors) with a history; past it the branch
            sampled least recently is forgotten.
    """

    interval: Duration = timedelta(seconds=10)
    window: Interval = timedelta(hours=1)
    max_series: int = Field(default=10_000, ge=1)


# --- the whole -----------------------------------------------------------------------
class ReplicationConfig(PrefixedSettings):
    """Settings of the replication sidecar (``lakefs-replication``).

    Every field and default of the replication configuration reference, plus
    ``source_lakefs`` (the replication user's credentials) and ``object_replication``.

    Attributes:
        region: this installation's region; mirrors name their destination by it.
        organization_id: partition key of the mirrors table; the same in every region.
        organization_name: on lakeFS Cloud, builds ``regional_endpoint`` when that is
            not set.
        regional_endpoint: URL of this region's lakeFS API.
        dst_endpoints: lakeFS URL of every other region, by region name.
        source_lakefs: the replication user's key, the same in every region.
        listen_address: where the mirrors API and ``/metrics`` listen; loopback by
            default (the server beside it proxies the API): a deployment that reaches
            the service over the network sets it (the Helm chart and the image do).
        advertised_address: where the other replication services of this region reach
            this one's API (they pass on news of a mirror this one follows, see
            :mod:`replication.shards`); by default ``listen_address``, or this host's
            address when that listens on every interface.
        list_mirrors_page_size: page size of every listing of the mirrors table.
        list_repositories_page_size: page size when the mirrors manager lists this
            region's repositories.
    """

    ENV_PREFIX: ClassVar[str] = REPLICATION_ENV_PREFIX
    ENV_ALIASES: ClassVar[Mapping[str, tuple[str, ...]]] = SECRET_ENV_VARS

    region: str = Field(min_length=1)
    organization_id: str = Field(min_length=1)
    organization_name: str | None = None
    regional_endpoint: HttpEndpoint | None = None
    dst_endpoints: dict[Annotated[str, Field(min_length=1)], HttpEndpoint]
    mirrors_database: MirrorsDatabaseSettings
    blockstore: BlockstoreConfig | None = None
    blockstores: BlockstoresConfig | None = None
    auth: ReplicationAuthConfig
    source_lakefs: LakeFSCredentials
    listen_address: ListenAddress = "127.0.0.1:8008"
    advertised_address: HttpEndpoint | None = None
    refstore_database: DatabaseConfig | None = Field(
        default=None, description="None: the lakeFS installation's own database"
    )
    list_mirrors_page_size: int = Field(default=1000, ge=1, le=MAX_PAGE_SIZE)
    list_repositories_page_size: int = Field(default=1000, ge=1)
    commit_sensor: CommitSensorConfig = Field(default_factory=CommitSensorConfig)
    mirrors_manager: MirrorsManagerConfig = Field(default_factory=MirrorsManagerConfig)
    validator: ValidatorConfig = Field(default_factory=ValidatorConfig)
    object_replication: ObjectReplicationConfig = Field(default_factory=ObjectReplicationConfig)
    lag_history: LagHistoryConfig = Field(default_factory=LagHistoryConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        if self.region in self.dst_endpoints:
            raise FieldValueError(
                "dst_endpoints",
                f"lists this installation's own region {self.region!r}; "
                "name only the other regions",
            )
        check_blockstore_sections(self.blockstore, self.blockstores, required=True)
        mirrors = self.mirrors_database
        if ("list_mirrors_page_size" in mirrors.model_fields_set
                and mirrors.list_mirrors_page_size != self.list_mirrors_page_size):
            raise FieldValueError(
                "mirrors_database.list_mirrors_page_size",
                "differs from list_mirrors_page_size; set list_mirrors_page_size at the "
                "top level only")
        if self.regional_endpoint is None:
            if not self.organization_name:
                raise FieldValueError(
                    "regional_endpoint", "required (or organization_name on lakeFS Cloud)"
                )
            self.regional_endpoint = (
                f"https://{self.organization_name}.{self.region}.lakefscloud.io"
            )
        return self

    def own_address(self) -> str | None:
        """Where the other replicas of this region reach this one's API
        (``advertised_address``, else derived from ``listen_address``); None if this
        host's address cannot be found."""
        if self.advertised_address:
            return self.advertised_address.rstrip("/")
        host, _, port = self.listen_address.rpartition(":")
        host = host.strip("[]")
        if host in ("", "0.0.0.0", "::"):  # every interface: this host's own address
            try:
                host = socket.gethostbyname(socket.gethostname())
            except OSError:
                return None
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def endpoint_for(self, region: str) -> str:
        """The lakeFS URL of ``region``: this region's own, or one of ``dst_endpoints``.

        Raises:
            ConfigError: the region is neither this one nor listed in dst_endpoints.
        """
        if region == self.region:
            assert self.regional_endpoint is not None  # resolved by the validator
            return self.regional_endpoint
        try:
            return self.dst_endpoints[region]
        except KeyError:
            raise ConfigError(
                "unknown region",
                [ConfigFieldError("dst_endpoints", f"no endpoint for region {region!r}")],
            ) from None


def load_replication_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ReplicationConfig:
    """Load the sidecar settings: the YAML file, then the environment.

    Args:
        path: YAML config file; None reads the file named by ``REPLICATION_CONFIG_FILE``
            if that is set, else no file (everything from the environment).
        env: environment to read; defaults to ``os.environ``.

    When ``refstore_database`` is not set, it defaults to the lakeFS installation's
    own database where that can be read from the same environment: the lakeFS config
    file named by ``LAKEFS_CONFIG_FILE``, or ``LAKEFS_DATABASE_*`` variables (as when
    the service runs beside the server with the server's settings).

    Raises:
        ConfigError: the file cannot be read or a setting is invalid; the message
            names each field and where its value came from.
    """
    env = os.environ if env is None else env
    config = load_settings(
        ReplicationConfig,
        path=path,
        env=env,
        file_env=REPLICATION_CONFIG_FILE_ENV,
        what="replication configuration",
    )
    if config.refstore_database is None:
        config.refstore_database = lakefs_database(env)
    return config


def lakefs_database(env: Mapping[str, str]) -> DatabaseConfig | None:
    """The lakeFS installation's database, if its settings are in ``env``; else None."""
    if not (env.get(SERVER_CONFIG_FILE_ENV)
            or any(name.startswith("LAKEFS_DATABASE_") for name in env)):
        return None
    lakefs_env = {k: v for k, v in env.items() if k.startswith("LAKEFS_")}
    # only the database is wanted: no key is generated for a server config read here
    lakefs_env.setdefault("LAKEFS_AUTH_ENCRYPT_SECRET_KEY", "unused-by-the-replication-service")
    server = load_server_config(None, lakefs_env)
    if server.database.type == "local" and not server.database.local.path:
        return None
    return server.database
