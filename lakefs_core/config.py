"""Settings of the versioning server (``lakefs-core``).

The server reads an optional YAML file and then ``LAKEFS_``-prefixed environment
variables, which win. Environment variables are named the way lakeFS names them:
the field path joined with ``_`` and upper-cased (``database.type`` ->
``LAKEFS_DATABASE_TYPE``, ``auth.encrypt.secret_key`` ->
``LAKEFS_AUTH_ENCRYPT_SECRET_KEY``); fields that hold a list, a map or a whole section
take a JSON value (``LAKEFS_BLOCKSTORES_STORES='[{"id": "a", ...}]'``). The loading
machinery, which the replication service shares, is :mod:`lakefs_core.settings`.

With no file and no variables at all the server runs embedded: SQLite metadata and a
local blockstore, both under ``data_dir`` (default ``~/.local/share/lakefs-mirror``).
Without a configured ``auth.encrypt.secret_key`` the embedded server generates a
random one at first start and keeps it in ``<data_dir>/secret_key`` (mode 0600; see
:attr:`EncryptConfig.generated`). Any other database requires a configured key.

Example:
    >>> cfg = load_server_config(None, env={"LAKEFS_DATABASE_TYPE": "local"})
    >>> cfg.database.type
    'local'
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from datetime import timedelta
from ipaddress import ip_address, ip_network
from typing import ClassVar, Literal, Self, TypeVar

from pydantic import (
    Field,
    IPvAnyNetwork,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from lakefs_core.block.config import BlockstoreConfig, BlockstoresConfig, BlockstoreType
from lakefs_core.settings import (
    ConfigError,
    ConfigFieldError,
    ConfigModel,
    Duration,
    FieldPathEnvSource,
    FieldValueError,
    HttpEndpoint,
    ListenAddress,
    PrefixedSettings,
    check_blockstore_sections,
    check_http_url,
    check_listen_address,
    env_var_paths,
    field_paths,
    format_duration,
    load_settings,
    parse_duration,
    plain_dict,
    read_yaml_file,
    validate_settings,
)

__all__ = [
    "ActionsConfig",
    "AlertWebhookConfig",
    "LuaHooksConfig",
    "DEFAULT_DATA_DIR",
    "INSECURE_SECRET_KEY",
    "SECRET_KEY_FILE",
    "QUICKSTART_ACCESS_KEY_ID",
    "QUICKSTART_SECRET_ACCESS_KEY",
    "QUICKSTART_USER_NAME",
    "SERVER_CONFIG_FILE_ENV",
    "SERVER_ENV_PREFIX",
    "AuthApiConfig",
    "AuthCacheConfig",
    "AuthConfig",
    "ConfigError",
    "ConfigFieldError",
    "ConfigModel",
    "DatabaseConfig",
    "DynamoDBDatabaseConfig",
    "Duration",
    "EncryptConfig",
    "FieldPathEnvSource",
    "FieldValueError",
    "GatewaysConfig",
    "HttpEndpoint",
    "InstallationConfig",
    "ListenAddress",
    "LocalDatabaseConfig",
    "LoggingConfig",
    "PostgresConfig",
    "PrefixedSettings",
    "ReplicationEndpointConfig",
    "S3GatewayConfig",
    "ServerConfig",
    "StorageConfig",
    "check_blockstore_sections",
    "check_http_url",
    "check_listen_address",
    "env_var_paths",
    "field_paths",
    "format_duration",
    "load_or_create_secret_key",
    "load_server_config",
    "load_settings",
    "parse_duration",
    "plain_dict",
    "read_yaml_file",
    "validate_settings",
]

SERVER_ENV_PREFIX = "LAKEFS_"
#: Environment variable naming the config file when no path is given explicitly.
SERVER_CONFIG_FILE_ENV = "LAKEFS_CONFIG_FILE"
#: Where the embedded mode keeps its SQLite file and local blockstore by default.
DEFAULT_DATA_DIR = "~/.local/share/lakefs-mirror"
#: The secret key used when none is configured in embedded mode. Anyone can read it
#: here, so credentials encrypted with it are not protected: never use it in production.
#: the key that embedded installations of earlier versions used when none was configured;
#: secrets encrypted with it are re-encrypted with the generated key (see services)
INSECURE_SECRET_KEY = "THIS_MUST_BE_CHANGED_IN_PRODUCTION"
#: the file in ``data_dir`` that keeps a generated ``auth.encrypt.secret_key``
SECRET_KEY_FILE = "secret_key"
#: The well-known quickstart identity (lakeFS uses the same one for ``--quickstart``).
QUICKSTART_USER_NAME = "quickstart"
QUICKSTART_ACCESS_KEY_ID = "AKIAIOSFOLQUICKSTART"
QUICKSTART_SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class LocalDatabaseConfig(ConfigModel):
    """The embedded SQLite metadata database."""

    path: str | None = Field(
        default=None, description="SQLite file; default <data_dir>/metadata.db"
    )


class PostgresConfig(ConfigModel):
    """A PostgreSQL (or CockroachDB) database, lakeFS field names.

    Attributes:
        max_open_connections: accepted as lakeFS names it; not used (the server
            sizes its own pools).
        max_idle_connections: accepted as lakeFS names it; not used.
        connection_max_lifetime: accepted as lakeFS names it; not used.
    """

    connection_string: SecretStr | None = Field(
        default=None, description="libpq URI, e.g. postgres://user:pass@host:5432/db"
    )
    max_open_connections: int = Field(default=25, ge=1)
    max_idle_connections: int = Field(default=25, ge=0)
    connection_max_lifetime: Duration = timedelta(minutes=5)


class DynamoDBDatabaseConfig(ConfigModel):
    """A DynamoDB table holding the metadata and the auth store, lakeFS field names.

    The table is created at start if missing: on-demand, or provisioned when both
    capacities are set.

    Attributes:
        table_name: the table.
        scan_limit: the most items one Query request reads (a listing's page).
        endpoint: another endpoint (DynamoDB Local, moto); empty means AWS's.
        aws_region: the table's region; empty means the AWS default chain's.
        aws_profile: a named profile of the shared AWS config files.
        aws_access_key_id: static credentials; empty means the AWS default chain.
        aws_secret_access_key: static credentials.
        read_capacity_units: provisioned read capacity of a table created at start.
        write_capacity_units: provisioned write capacity of a table created at start.
        health_check_interval: accepted as lakeFS names it; not used.
    """

    table_name: str = Field(default="kvstore", min_length=3, max_length=255,
                            pattern=r"^[A-Za-z0-9_.-]+$")
    scan_limit: int = Field(default=1024, ge=1)
    endpoint: str | None = None
    aws_region: str | None = None
    aws_profile: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: SecretStr | None = None
    read_capacity_units: int | None = Field(default=None, ge=1)
    write_capacity_units: int | None = Field(default=None, ge=1)
    health_check_interval: Duration = timedelta(0)

    @model_validator(mode="after")
    def _both_capacities_or_none(self) -> Self:
        if (self.read_capacity_units is None) != (self.write_capacity_units is None):
            raise FieldValueError(
                "read_capacity_units",
                "set both read_capacity_units and write_capacity_units (provisioned), "
                "or neither (on-demand)")
        return self


class DatabaseConfig(ConfigModel):
    """Where the metadata (refstore and auth store) lives: ``local`` (SQLite),
    ``postgres`` or ``dynamodb``.

    Attributes:
        type: ``local`` (SQLite, the embedded default), ``postgres`` (also
            CockroachDB) or ``dynamodb``; the section of that name configures it.
    """

    type: Literal["local", "postgres", "dynamodb"] = "local"
    local: LocalDatabaseConfig = Field(default_factory=LocalDatabaseConfig)
    postgres: PostgresConfig = Field(default_factory=PostgresConfig)
    dynamodb: DynamoDBDatabaseConfig = Field(default_factory=DynamoDBDatabaseConfig)

    @model_validator(mode="after")
    def _postgres_needs_connection(self) -> Self:
        if self.type == "postgres" and self.postgres.connection_string is None:
            raise FieldValueError("postgres.connection_string", "required when type is postgres")
        return self

    def sqlalchemy_url(self) -> str:
        """A SQLAlchemy URL for this database (``sqlite:///...`` or ``postgresql+psycopg://``).

        Raises:
            ConfigError: the local path has not been resolved (load the config through
                :func:`load_server_config`, which fills it from ``data_dir``).
        """
        if self.type == "local":
            if self.local.path is None:
                raise ConfigError(
                    "invalid configuration",
                    [ConfigFieldError("database.local.path", "not set")],
                )
            return "sqlite:///" + self.local.path
        if self.type == "dynamodb":
            raise ConfigError("invalid configuration", [ConfigFieldError(
                "database.type", "dynamodb is not an SQL database: it has no SQLAlchemy URL")])
        assert self.postgres.connection_string is not None  # checked by the validator
        dsn = self.postgres.connection_string.get_secret_value()
        scheme, sep, rest = dsn.partition("://")
        if sep and scheme in ("postgres", "postgresql", "cockroachdb"):
            return "postgresql+psycopg://" + rest
        return dsn


class AuthCacheConfig(ConfigModel):
    """``auth.cache``: how long resolved credentials and policies are reused.

    A server process reuses them while the auth tables are unchanged (it reads their
    change count on every request), so a revocation is refused at once; ``ttl`` bounds
    the replication service's reuse of what another lakeFS answered.

    Attributes:
        enabled: reuse resolved credentials and policies.
        size: how many access keys are kept.
        ttl: how long the replication service reuses one before it asks again.
    """

    enabled: bool = True
    size: int = Field(default=1024, ge=1)
    ttl: Duration = timedelta(seconds=20)


class AuthApiConfig(ConfigModel):
    """``auth.api``: an external auth service instead of the local auth store."""

    endpoint: HttpEndpoint | None = Field(
        default=None, description="external auth service; empty means the local auth store"
    )


class EncryptConfig(ConfigModel):
    """Key that encrypts stored credential secrets (and signs login tokens).

    Attributes:
        secret_key: encrypts stored credential secrets and signs login tokens; the
            same in every process of an installation (the replication service's
            ``auth.encrypt.secret_key``). Unset: the embedded server generates one
            into ``<data_dir>/secret_key``; any other database requires it.
        key_file: where the embedded mode keeps the key it generated, when no key was
            configured ("" otherwise).
        generated: True when that file was created by this load (the first start).
    """

    secret_key: SecretStr | None = None
    _key_file: str = PrivateAttr(default="")
    _generated: bool = PrivateAttr(default=False)

    @property
    def key_file(self) -> str:
        return self._key_file

    @property
    def generated(self) -> bool:
        return self._generated


class AuthConfig(ConfigModel):
    """``auth``: credential encryption, external auth service, caching."""

    encrypt: EncryptConfig = Field(default_factory=EncryptConfig)
    api: AuthApiConfig = Field(default_factory=AuthApiConfig)
    cache: AuthCacheConfig = Field(default_factory=AuthCacheConfig)


class InstallationConfig(ConfigModel):
    """First admin created at startup when the auth store is empty (lakeFS names).

    Attributes:
        user_name: the first admin's name; with both keys set, it is created at
            startup when no user exists yet.
        access_key_id: the first admin's access key id.
        secret_access_key: the first admin's secret access key.
        fixed_id: accepted as lakeFS names it; not used.
    """

    user_name: str | None = None
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    fixed_id: str | None = None


class LoggingConfig(ConfigModel):
    """``logging``: level (DEBUG, INFO, WARN, ERROR; any case) and format (text, json).

    Attributes:
        level: the least severe level logged (``WARNING`` is read as ``WARN``).
        format: ``text``, or ``json`` (one JSON object a line).
    """

    level: Literal["DEBUG", "INFO", "WARN", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"

    @field_validator("level", mode="before")
    @classmethod
    def _normalise_level(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().upper()
            return "WARN" if value == "WARNING" else value
        return value

    @field_validator("format", mode="before")
    @classmethod
    def _normalise_format(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class ReplicationEndpointConfig(ConfigModel):
    """Where the server's ``/service/replication/`` proxy sends requests.

    Attributes:
        endpoint: the replication service of this region (its ``listen_address``).
    """

    endpoint: HttpEndpoint = "http://127.0.0.1:8008"


class StorageConfig(ConfigModel):
    """``storage_config``: hints the server gives clients about storage, and how long
    an address it hands out for direct writes may be linked.

    Attributes:
        link_address_expiry: an address from ``GET .../staging/backing`` (or a pre-signed
            multipart upload) can be linked once, within this time (lakeFS's 6 hours).
    """

    default_namespace_prefix: str | None = Field(
        default=None, description="suggested storage namespace prefix for new repositories"
    )
    link_address_expiry: Duration = timedelta(hours=6)


class S3GatewayConfig(ConfigModel):
    """``gateways.s3``: host names for virtual-host addressing, and the region it reports.

    Attributes:
        domain_name: host names under which ``<repository>.<domain>`` addresses a
            repository (virtual-host style); a comma-separated string is accepted.
        region: the region the gateway reports and signs with.
    """

    domain_name: list[str] = Field(default_factory=lambda: ["s3.local.lakefs.io"])
    region: str = "us-east-1"

    @field_validator("domain_name", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        if isinstance(value, str):
            return [d.strip() for d in value.split(",") if d.strip()]
        return value


class HttpConfig(ConfigModel):
    """``http``: how much a request may cost before it is served (API and S3 gateway).

    Attributes:
        request_body_timeout: each MiB of a request body (or its end) must arrive within
            this time, else the request is refused (408; S3 ``RequestTimeout``) and the
            connection closed: a slow sender cannot hold the server for long.
        max_request_body: the largest body of a request that is not object data (JSON
            of the API, the replication proxy); larger ones are refused with 413 before
            they are read. Object uploads are streamed and have no such limit.
        transfer_threads: worker threads that move object data (S3 gateway requests and
            API uploads), apart from those that serve the rest of the API, so that data
            transfers can never starve it.
        max_request_head: the largest request line and headers of a request, in bytes;
            a longer head is answered 431 and its connection closed before it is
            parsed further (parsing an endless header costs quadratic time).
    """

    request_body_timeout: Duration = timedelta(seconds=30)
    max_request_body: int = Field(default=8 << 20, ge=1024)
    transfer_threads: int = Field(default=32, ge=1, le=1024)
    max_request_head: int = Field(default=64 << 10, ge=8 << 10, le=16 << 20)


class MetricsConfig(ConfigModel):
    """``metrics``: who may read the server's ``/metrics`` (unauthenticated, as lakeFS's).

    The metrics name repositories, actions and hooks, so they are served only to
    clients in these networks (loopback by default: a scraper on the host, or behind a
    proxy there); anyone else is answered 403.

    Attributes:
        allowed_networks: client networks (``10.0.0.0/8``, ``::1/128``) that may read
            ``/metrics``; a comma-separated string is accepted; empty: nobody.
    """

    allowed_networks: list[IPvAnyNetwork] = Field(default_factory=lambda: [
        ip_network("127.0.0.0/8"), ip_network("::1/128")])

    @field_validator("allowed_networks", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        if isinstance(value, str):
            return [n.strip() for n in value.split(",") if n.strip()]
        return value

    def allows(self, address: str) -> bool:
        """Whether a client at ``address`` may read ``/metrics``."""
        try:
            client = ip_address(address)
        except ValueError:  # no IP address (a Unix socket, an in-process client)
            return False
        return any(client in network for network in self.allowed_networks)


class LuaHooksConfig(ConfigModel):
    """``actions.lua``: the bounds of a ``lua`` hook's run.

    Scripts run in worker processes, never in the server's: each with hard CPU and
    address-space limits and none of the server's environment, killed at its
    deadline. Whatever module a script uses, it cannot connect to link-local addresses
    (cloud instance metadata).

    Attributes:
        timeout: a script still running after this long fails its hook (its worker is
            killed a second later if it is stuck outside Lua).
        max_memory: the most memory (bytes) one script's Lua state may hold; past it
            the script fails its hook. Its worker process may map this much plus
            512 MiB for the interpreter and libraries.
        net_http_enabled: whether scripts may ``require("net/http")`` to send HTTP
            requests out of the server (each bounded by 30s and the script's timeout).
        workers: how many worker processes run lua hooks, one hook at a time each
            (more hooks at once wait for a free one); started on the first lua hook.
    """

    timeout: Duration = timedelta(seconds=30)
    max_memory: int = Field(default=128 << 20, ge=1 << 20)
    net_http_enabled: bool = False
    workers: int = Field(default=2, ge=1, le=64)


class AlertWebhookConfig(ConfigModel):
    """``actions.alert_webhook``: where a failed hook is reported.

    Attributes:
        url: every failed hook run is POSTed here as one JSON message (repository,
            event, run and hook ids, action, error); unset, none is sent.
        timeout: how long one delivery may take; a failed delivery is logged.
    """

    url: HttpEndpoint | None = None
    timeout: Duration = timedelta(seconds=5)


class ActionsEnvConfig(ConfigModel):
    """``actions.env``: which of the server's environment variables hooks may read.

    Attributes:
        enabled: whether ``{{ ENV.NAME }}`` in a hook's properties reads the server's
            environment at all.
        prefix: only variables whose names start with this are visible to hooks (the
            server's own secrets live in the same environment).
    """

    enabled: bool = True
    prefix: str = "LAKEFSACTION_"


class WebhookDestinationsConfig(ConfigModel):
    """``actions.webhook``: where webhook and Airflow hooks may send requests.

    Attributes:
        denied_networks: address ranges (CIDR) that hook requests never reach; by
            default the link-local ranges where cloud hosts serve instance credentials.
        deny_private: also refuse loopback, private, link-local and reserved addresses
            (the server's own API and the rest of its network).
    """

    denied_networks: list[str] = Field(
        default_factory=lambda: ["169.254.0.0/16", "fe80::/10", "fd00:ec2::/32"])
    deny_private: bool = False

    @field_validator("denied_networks")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                raise ValueError(f"denied_networks: {exc}") from None
        return value


class ActionsConfig(ConfigModel):
    """``actions``: the hooks that repositories' action files run."""

    lua: LuaHooksConfig = Field(default_factory=LuaHooksConfig)
    env: ActionsEnvConfig = Field(default_factory=ActionsEnvConfig)
    webhook: WebhookDestinationsConfig = Field(default_factory=WebhookDestinationsConfig)
    alert_webhook: AlertWebhookConfig = Field(default_factory=AlertWebhookConfig)


class BranchesConfig(ConfigModel):
    """``branches``: the housekeeping of ephemeral branches.

    Attributes:
        housekeeping_interval: how often the server deletes the branches whose expiry
            (``expires_at`` of create-branch, this server's extension) has passed,
            running their delete-branch hooks; ``0s`` turns the housekeeping off.
    """

    housekeeping_interval: Duration = timedelta(minutes=1)


class SSTableMemoryConfig(ConfigModel):
    """``committed.sstable.memory``: ranges parsed into memory.

    Attributes:
        cache_size_bytes: most memory that the parsed ranges of all repositories take
            together (their Arrow tables, and their records and encodings once made);
            the least recently used go first. lakeFS's key and default.
    """

    cache_size_bytes: int = Field(default=200_000_000, ge=1_000_000, le=1 << 40)


class SSTableConfig(ConfigModel):
    """``committed.sstable``."""

    memory: SSTableMemoryConfig = Field(default_factory=SSTableMemoryConfig)


class CommittedConfig(ConfigModel):
    """``committed``: committed data (ranges and metaranges)."""

    sstable: SSTableConfig = Field(default_factory=SSTableConfig)


class GatewaysConfig(ConfigModel):
    """``gateways``: the S3-compatible gateway."""

    s3: S3GatewayConfig = Field(default_factory=S3GatewayConfig)


_B = TypeVar("_B", bound=BlockstoreConfig)


def _resolve_local_path(store: _B, data_dir: str) -> _B:
    """Default a local store's root to ``<data_dir>/blockstore``; expand ``~``."""
    local = store.local
    if local is None or store.type is not BlockstoreType.LOCAL:
        return store
    path = local.path if "path" in local.model_fields_set else os.path.join(data_dir, "blockstore")
    path = os.path.abspath(os.path.expanduser(path))
    return store.model_copy(update={"local": local.model_copy(update={"path": path})})


def load_or_create_secret_key(path: str) -> tuple[str, bool]:
    """The key kept in ``path``, created (random, mode 0600) if there is none.

    Safe when several processes start at once: the file appears whole or not at all.

    Returns:
        (key, whether this call created the file)

    Raises:
        FieldValueError: the file cannot be read or written, or is empty.
    """
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except FileNotFoundError:
        key = ""
    except OSError as e:
        raise FieldValueError("auth.encrypt.secret_key", f"cannot read {path}: {e}") from None
    else:
        if not key:
            raise FieldValueError("auth.encrypt.secret_key", f"{path} is empty")
        return key, False
    key = secrets.token_urlsafe(32)
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{SECRET_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(key + "\n")
        try:
            os.link(tmp, path)  # atomic, and never over another process's key
        except FileExistsError:
            return load_or_create_secret_key(path)
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise FieldValueError("auth.encrypt.secret_key", f"cannot create {path}: {e}") from None
    return key, True


class ServerConfig(PrefixedSettings):
    """Settings of the versioning server (``lakefs-core``).

    ``ServerConfig()`` reads ``LAKEFS_*`` from the process environment;
    :func:`load_server_config` also reads a YAML file.

    Attributes:
        listen_address: where the API, the S3 gateway and the replication proxy listen.
        workers: server processes that serve the API and the S3 gateway from the one
            listening socket (the operating system hands each connection to one of
            them). Each process has its own threads (``http.transfer_threads`` each)
            and database connections; caches are per process, and none holds a
            branch head (docs/ARCHITECTURE.md, "Several server processes").
        data_dir: where the embedded mode keeps its SQLite file, local blockstore and
            generated secret key.
    """

    ENV_PREFIX: ClassVar[str] = SERVER_ENV_PREFIX

    listen_address: ListenAddress = "127.0.0.1:8000"
    workers: int = Field(default=1, ge=1, le=256)
    data_dir: str = DEFAULT_DATA_DIR
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    blockstore: BlockstoreConfig | None = None
    blockstores: BlockstoresConfig | None = None
    auth: AuthConfig = Field(default_factory=AuthConfig)
    installation: InstallationConfig = Field(default_factory=InstallationConfig)
    replication: ReplicationEndpointConfig = Field(default_factory=ReplicationEndpointConfig)
    storage_config: StorageConfig = Field(default_factory=StorageConfig)
    gateways: GatewaysConfig = Field(default_factory=GatewaysConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    actions: ActionsConfig = Field(default_factory=ActionsConfig)
    branches: BranchesConfig = Field(default_factory=BranchesConfig)
    committed: CommittedConfig = Field(default_factory=CommittedConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        data_dir = os.path.abspath(os.path.expanduser(self.data_dir))
        if data_dir != self.data_dir:
            self.data_dir = data_dir
        check_blockstore_sections(self.blockstore, self.blockstores, required=False)
        if self.blockstores is None and self.blockstore is None:
            self.blockstore = BlockstoreConfig()
        if self.blockstore is not None:
            self.blockstore = _resolve_local_path(self.blockstore, data_dir)
        if self.blockstores is not None:
            stores = tuple(_resolve_local_path(s, data_dir) for s in self.blockstores.stores)
            self.blockstores = self.blockstores.model_copy(update={"stores": stores})
        local_db = self.database.local
        local_db.path = os.path.abspath(
            os.path.expanduser(local_db.path or os.path.join(data_dir, "metadata.db"))
        )
        encrypt = self.auth.encrypt
        if encrypt.secret_key is None:
            if self.database.type != "local":
                raise FieldValueError(
                    "auth.encrypt.secret_key",
                    f"required when database.type is {self.database.type} "
                    "(only the embedded local database generates one)",
                )
            path = os.path.join(data_dir, SECRET_KEY_FILE)
            key, encrypt._generated = load_or_create_secret_key(path)
            encrypt.secret_key = SecretStr(key)
            encrypt._key_file = path
        return self

    @property
    def is_embedded(self) -> bool:
        """True when the metadata lives in the local SQLite file."""
        return self.database.type == "local"


def load_server_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    quickstart: bool = False,
) -> ServerConfig:
    """Load the server settings: defaults, then the YAML file, then ``LAKEFS_*`` variables.

    Args:
        path: YAML config file; None reads the file named by ``LAKEFS_CONFIG_FILE``
            if that is set, else no file.
        env: environment to read; defaults to ``os.environ``.
        quickstart: fill the first-admin ``installation`` fields with the well-known
            quickstart identity where they are not configured.

    Raises:
        ConfigError: the file cannot be read or a setting is invalid; the message
            names each field and where its value came from.
    """
    defaults = None
    if quickstart:
        defaults = {
            "installation": {
                "user_name": QUICKSTART_USER_NAME,
                "access_key_id": QUICKSTART_ACCESS_KEY_ID,
                "secret_access_key": QUICKSTART_SECRET_ACCESS_KEY,
            }
        }
    return load_settings(
        ServerConfig,
        path=path,
        env=os.environ if env is None else env,
        file_env=SERVER_CONFIG_FILE_ENV,
        defaults=defaults,
        what="server configuration",
    )
