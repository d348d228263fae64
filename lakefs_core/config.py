"""Settings of the versioning server, and the loading machinery the sidecar shares.

The server reads an optional YAML file and then ``LAKEFS_``-prefixed environment
variables, which win. Environment variables are named the way lakeFS names them:
the field path joined with ``_`` and upper-cased (``database.type`` ->
``LAKEFS_DATABASE_TYPE``, ``auth.encrypt.secret_key`` ->
``LAKEFS_AUTH_ENCRYPT_SECRET_KEY``). Because field names contain underscores
themselves, a variable is matched against the list of every known field path, never
split on ``_``. Fields that hold a list, a map or a whole section take a JSON value
(``LAKEFS_BLOCKSTORES_STORES='[{"id": "a", ...}]'``).

With no file and no variables at all the server runs embedded: SQLite metadata and a
local blockstore, both under ``data_dir`` (default ``~/.local/share/lakefs-mirror``),
and a well-known, insecure ``auth.encrypt.secret_key`` (see
:attr:`EncryptConfig.insecure`). Any other database requires a real secret key.

Example:
    >>> cfg = load_server_config(None, env={"LAKEFS_DATABASE_TYPE": "local"})
    >>> cfg.database.type
    'local'
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lakefs_core.block.config import BlockstoreConfig, BlockstoresConfig, BlockstoreType
from lakefs_core.errors import ValidationError

__all__ = [
    "DEFAULT_DATA_DIR",
    "INSECURE_SECRET_KEY",
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
INSECURE_SECRET_KEY = "THIS_MUST_BE_CHANGED_IN_PRODUCTION"
#: The well-known quickstart identity (lakeFS uses the same one for ``--quickstart``).
QUICKSTART_USER_NAME = "quickstart"
QUICKSTART_ACCESS_KEY_ID = "AKIAIOSFOLQUICKSTART"
QUICKSTART_SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


# --- errors ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConfigFieldError:
    """One invalid setting.

    Attributes:
        field: dotted path of the setting, e.g. ``database.type`` or
            ``blockstores.stores[1].id``.
        message: what is wrong with it.
        source: where the value came from (an environment variable name or a file
            path), or None for a default or a programmatic value.
    """

    field: str
    message: str
    source: str | None = None

    def __str__(self) -> str:
        where = f" (from {self.source})" if self.source else ""
        return f"{self.field}: {self.message}{where}"


class ConfigError(ValidationError):
    """The configuration is invalid; the message names every offending field.

    Attributes:
        errors: one entry per invalid setting (empty for file-level problems such as
            unreadable YAML).
    """

    def __init__(self, message: str, errors: Sequence[ConfigFieldError] = ()) -> None:
        self.errors: list[ConfigFieldError] = list(errors)
        if self.errors:
            message = message + ":\n" + "\n".join(f"  {e}" for e in self.errors)
        super().__init__(message)

    @property
    def fields(self) -> list[str]:
        """Dotted paths of the invalid settings."""
        return [e.field for e in self.errors]


class FieldValueError(ValueError):
    """Raised by a model validator to blame one field below the model being validated.

    Args:
        field: dotted path relative to the model, e.g. ``encrypt.secret_key``.
        message: what is wrong.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --- durations ------------------------------------------------------------------------
_DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"\d+\.?\d*|\.\d+")


def parse_duration(value: object) -> timedelta:
    """Parse a Go-style duration (``20s``, ``1m``, ``1h30m``, ``500ms``) into a timedelta.

    A plain number (int, float or numeric string) is taken as seconds. Negative
    durations are refused.

    Raises:
        ValueError: the value is not a duration.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError("a duration is expected, such as '20s', '1m' or '1h30m'")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            seconds = float(text)
        else:
            pos = 0
            seconds = 0.0
            for match in _DURATION_PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
                pos = match.end()
            if pos == 0 or pos != len(text):
                raise ValueError(
                    f"invalid duration {value!r}: expected a number with a unit "
                    "(ns, us, ms, s, m, h), such as '20s', '1m' or '1h30m'"
                )
    else:
        raise ValueError("a duration is expected, such as '20s', '1m' or '1h30m'")
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """Format a timedelta the way :func:`parse_duration` reads it (``1h30m``, ``500ms``)."""
    micros = round(value.total_seconds() * 1_000_000)
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000_000:
        if micros % 1000 == 0:
            return f"{sign}{micros // 1000}ms"
        return f"{sign}{micros}us"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if fraction:
        text += f"{seconds}.{fraction:06d}".rstrip("0") + "s"
    elif seconds:
        text += f"{seconds}s"
    return sign + text


#: A timedelta read from ``20s``/``1m``/``1h30m``/``500ms`` (or a number of seconds),
#: written back in the same form when dumped as JSON.
Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]


# --- shared validators ----------------------------------------------------------------
def check_listen_address(value: str) -> str:
    """Check ``host:port`` (host may be empty, a name, an IPv4 or a bracketed IPv6)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port, such as 0.0.0.0:8000, got {value!r}")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError(f"malformed IPv6 host in {value!r}")
    return value


def check_http_url(value: str) -> str:
    """Check an absolute http(s) URL with a host; the trailing slash is dropped."""
    match = re.fullmatch(r"https?://([^/?#]+)(/[^?#]*)?", value.strip())
    if not match:
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.strip().rstrip("/")


#: ``host:port`` to listen on.
ListenAddress = Annotated[str, AfterValidator(check_listen_address)]
#: An absolute http(s) URL, trailing slash dropped.
HttpEndpoint = Annotated[str, AfterValidator(check_http_url)]


def check_blockstore_sections(
    blockstore: BlockstoreConfig | None, blockstores: BlockstoresConfig | None, *, required: bool
) -> None:
    """Check that at most one (exactly one if ``required``) blockstore section is set.

    Raises:
        FieldValueError: both sections, or none when one is required.
    """
    if blockstore is not None and blockstores is not None:
        raise FieldValueError(
            "blockstores", "blockstore and blockstores are mutually exclusive: set one"
        )
    if required and blockstore is None and blockstores is None:
        raise FieldValueError(
            "blockstore", "required (the same blockstore as the lakeFS installation)"
        )


# --- models ---------------------------------------------------------------------------
def _reveal(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _reveal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reveal(v) for v in value]
    return value


def plain_dict(model: BaseModel) -> dict[str, Any]:
    """A model as a plain nested dict, secrets revealed, unset optionals omitted.

    Durations stay timedelta objects; this is for handing settings to code that takes
    plain data (a backend's own config object), not for printing.
    """
    return typing.cast(dict[str, Any], _reveal(model.model_dump(exclude_none=True)))


class ConfigModel(BaseModel):
    """Base of every config section: unknown keys are errors, so a typo is caught."""

    model_config = ConfigDict(extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of the section (see :func:`plain_dict`)."""
        return plain_dict(self)


class LocalDatabaseConfig(ConfigModel):
    """The embedded SQLite metadata database."""

    path: str | None = Field(
        default=None, description="SQLite file; default <data_dir>/metadata.db"
    )


class PostgresConfig(ConfigModel):
    """A PostgreSQL (or CockroachDB) database, lakeFS field names."""

    connection_string: SecretStr | None = Field(
        default=None, description="libpq URI, e.g. postgres://user:pass@host:5432/db"
    )
    max_open_connections: int = Field(default=25, ge=1)
    max_idle_connections: int = Field(default=25, ge=0)
    connection_max_lifetime: Duration = timedelta(minutes=5)


class DatabaseConfig(ConfigModel):
    """Where the refstore (metadata) lives: ``local`` (SQLite) or ``postgres``."""

    type: Literal["local", "postgres"] = "local"
    local: LocalDatabaseConfig = Field(default_factory=LocalDatabaseConfig)
    postgres: PostgresConfig = Field(default_factory=PostgresConfig)

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
        assert self.postgres.connection_string is not None  # checked by the validator
        dsn = self.postgres.connection_string.get_secret_value()
        scheme, sep, rest = dsn.partition("://")
        if sep and scheme in ("postgres", "postgresql", "cockroachdb"):
            return "postgresql+psycopg://" + rest
        return dsn


class AuthCacheConfig(ConfigModel):
    """``auth.cache``: how long resolved credentials and policies are reused."""

    enabled: bool = True
    size: int = Field(default=1024, ge=1)
    ttl: Duration = timedelta(seconds=20)


class AuthApiConfig(ConfigModel):
    """``auth.api``: an external auth service instead of the local auth store."""

    endpoint: HttpEndpoint | None = Field(
        default=None, description="external auth service; empty means the local auth store"
    )


class EncryptConfig(ConfigModel):
    """Key that encrypts stored credential secrets.

    Attributes:
        insecure: True when no key was configured and the embedded mode's well-known
            default is in use (the server should say so loudly).
    """

    secret_key: SecretStr | None = None
    _insecure: bool = PrivateAttr(default=False)

    @property
    def insecure(self) -> bool:
        """Whether the embedded mode's well-known default key is in use."""
        return self._insecure


class AuthConfig(ConfigModel):
    """``auth``: credential encryption, external auth service, caching."""

    encrypt: EncryptConfig = Field(default_factory=EncryptConfig)
    api: AuthApiConfig = Field(default_factory=AuthApiConfig)
    cache: AuthCacheConfig = Field(default_factory=AuthCacheConfig)


class InstallationConfig(ConfigModel):
    """First admin created at startup when the auth store is empty (lakeFS names)."""

    user_name: str | None = None
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    fixed_id: str | None = None


class LoggingConfig(ConfigModel):
    """``logging``: level (DEBUG, INFO, WARN, ERROR; any case) and format (text, json)."""

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
    """Where the server's ``/service/replication/`` proxy sends requests."""

    endpoint: HttpEndpoint = "http://127.0.0.1:8008"


class StorageConfig(ConfigModel):
    """``storage_config``: hints the server gives clients about storage."""

    default_namespace_prefix: str | None = Field(
        default=None, description="suggested storage namespace prefix for new repositories"
    )


class S3GatewayConfig(ConfigModel):
    """``gateways.s3``: host names for virtual-host addressing, and the region it reports."""

    domain_name: list[str] = Field(default_factory=lambda: ["s3.local.lakefs.io"])
    region: str = "us-east-1"

    @field_validator("domain_name", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        if isinstance(value, str):
            return [d.strip() for d in value.split(",") if d.strip()]
        return value


class GatewaysConfig(ConfigModel):
    """``gateways``: the S3-compatible gateway."""

    s3: S3GatewayConfig = Field(default_factory=S3GatewayConfig)


class PrefixedSettings(BaseSettings):
    """Settings read from ``<ENV_PREFIX><FIELD_PATH>`` variables (and ``ENV_ALIASES``).

    ``Model()`` reads the process environment; the ``load_*`` functions also read a
    YAML file and report errors as :class:`ConfigError`.
    """

    model_config = SettingsConfigDict(extra="forbid")

    #: prefix of the environment variables, e.g. ``LAKEFS_``
    ENV_PREFIX: ClassVar[str] = ""
    #: extra un-prefixed variable names for chosen field paths
    ENV_ALIASES: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, FieldPathEnvSource(
            settings_cls, cls.ENV_PREFIX, os.environ, aliases=cls.ENV_ALIASES
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of the settings (see :func:`plain_dict`)."""
        return plain_dict(self)


_B = TypeVar("_B", bound=BlockstoreConfig)


def _resolve_local_path(store: _B, data_dir: str) -> _B:
    """Default a local store's root to ``<data_dir>/blockstore``; expand ``~``."""
    local = store.local
    if local is None or store.type is not BlockstoreType.LOCAL:
        return store
    path = local.path if "path" in local.model_fields_set else os.path.join(data_dir, "blockstore")
    path = os.path.abspath(os.path.expanduser(path))
    return store.model_copy(update={"local": local.model_copy(update={"path": path})})


class ServerConfig(PrefixedSettings):
    """Settings of the versioning server (``lakefs-core``).

    ``ServerConfig()`` reads ``LAKEFS_*`` from the process environment;
    :func:`load_server_config` also reads a YAML file.
    """

    ENV_PREFIX: ClassVar[str] = SERVER_ENV_PREFIX

    listen_address: ListenAddress = "127.0.0.1:8000"
    data_dir: str = DEFAULT_DATA_DIR
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    blockstore: BlockstoreConfig | None = None
    blockstores: BlockstoresConfig | None = None
    auth: AuthConfig = Field(default_factory=AuthConfig)
    installation: InstallationConfig = Field(default_factory=InstallationConfig)
    replication: ReplicationEndpointConfig = Field(default_factory=ReplicationEndpointConfig)
    storage_config: StorageConfig = Field(default_factory=StorageConfig)
    gateways: GatewaysConfig = Field(default_factory=GatewaysConfig)
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
                    "(only the embedded local database has an insecure default)",
                )
            encrypt.secret_key = SecretStr(INSECURE_SECRET_KEY)
            encrypt._insecure = True
        return self

    @property
    def is_embedded(self) -> bool:
        """True when the metadata lives in the local SQLite file."""
        return self.database.type == "local"


# --- environment mapping --------------------------------------------------------------
def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model class behind ``Model`` or ``Model | None``, else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(models) == 1:
            return _section_model(models[0])
    return None


def _takes_json(annotation: Any) -> bool:
    """Whether an environment value for this field must be parsed as JSON."""
    if _section_model(annotation) is not None:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_takes_json(a) for a in typing.get_args(annotation) if a is not type(None))
    return origin in (list, dict, tuple, set) or annotation in (list, dict)


def field_paths(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], FieldInfo]]:
    """Every field path of a settings model, sections and their fields, depth first."""
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        path = (*prefix, name)
        yield path, info
        sub = _section_model(info.annotation)
        if sub is not None:
            yield from field_paths(sub, path)


def env_var_paths(model: type[BaseModel], prefix: str) -> dict[str, tuple[tuple[str, ...], bool]]:
    """Every environment variable name a settings model accepts.

    Returns:
        Upper-case variable name -> (field path, whether the value is JSON). A name
        that two paths would share goes to the path whose leading segments are longest
        (``a_b.c`` beats ``a.b_c``), so the mapping is deterministic.
    """
    names: dict[str, tuple[tuple[str, ...], bool]] = {}
    for path, info in sorted(field_paths(model), key=lambda item: [-len(p) for p in item[0]]):
        name = (prefix + "_".join(path)).upper()
        names.setdefault(name, (path, _takes_json(info.annotation)))
    return names


def _set_path(data: dict[str, Any], path: Sequence[str], value: Any) -> None:
    node = data
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


class FieldPathEnvSource(PydanticBaseSettingsSource):
    """Environment variables matched against a model's known field paths.

    Args:
        settings_cls: the settings model.
        prefix: variable prefix, e.g. ``LAKEFS_``.
        env: the environment to read (``os.environ`` or a plain mapping in tests).
        aliases: extra variable names (matched case-insensitively, no prefix) for
            chosen field paths, e.g. the keys of a Kubernetes secret.

    After the source is called, :attr:`origins` maps every field path it set to the
    variable it came from (used to name the variable in error messages).
    """

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        prefix: str,
        env: Mapping[str, str],
        aliases: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        super().__init__(settings_cls)
        self.prefix = prefix
        self.env = env
        self.aliases = {k.upper(): v for k, v in (aliases or {}).items()}
        self.origins: dict[tuple[str, ...], str] = {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        # Values are resolved in __call__ by whole paths, never field by field.
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        known = env_var_paths(self.settings_cls, self.prefix)
        found: list[tuple[int, int, str, tuple[str, ...], bool, str]] = []
        for var in sorted(self.env):
            upper = var.upper()
            if upper in known:
                path, is_json = known[upper]
                rank = 1
            elif upper in self.aliases:
                path = self.aliases[upper]
                is_json, rank = False, 0
            else:
                continue
            found.append((len(path), rank, var, path, is_json, self.env[var]))
        data: dict[str, Any] = {}
        # Shallow paths first so that a deeper variable refines a JSON section;
        # prefixed names after aliases so that they win.
        for _, _, var, path, is_json, raw in sorted(found, key=lambda f: (f[0], f[1])):
            value: Any = raw
            if is_json:
                # Not JSON: hand the text on and let validation name the field.
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(raw)
            _set_path(data, path, value)
            self.origins[path] = var
        return data


# --- loading --------------------------------------------------------------------------
def read_yaml_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML config file whose top level is a mapping (an empty file is ``{}``).

    Raises:
        ConfigError: the file is missing, unreadable, not YAML, or not a mapping.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {os.fspath(path)}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {os.fspath(path)} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {os.fspath(path)} must hold a mapping at the top level, "
            f"got {type(data).__name__}"
        )
    return data


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", bound=PrefixedSettings)


def _dotted(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":  # pydantic's marker: the map key itself is invalid
            text += " (key)"
        elif not re.fullmatch(r"[\w.-]+", part):
            text += f"[{part!r}]"
        else:
            text += ("." if text else "") + part
    return text


_SECRET_MARKERS = ("secret", "password", "connection_string", "token", "access_key")


def _is_secret(loc: Sequence[int | str]) -> bool:
    text = _dotted(loc)
    return any(marker in text for marker in _SECRET_MARKERS)


def _in_data(data: Any, loc: Sequence[int | str]) -> bool:
    for part in loc:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if not (in_dict or in_list):
            return False
        data = data[part]
    return True


def _where_to_set(
    loc: Sequence[int | str],
    env_prefix: str | None,
    aliases: Mapping[str, tuple[str, ...]] | None,
) -> str:
    path = tuple(str(p) for p in loc)
    names = [env_prefix + "_".join(path).upper()] if env_prefix else []
    names += [n for n, p in (aliases or {}).items() if p[: len(path)] == path]
    return " (set it in the config file or with " + ", ".join(names) + ")" if names else ""


def validate_settings(
    model: type[M],
    data: dict[str, Any],
    *,
    origins: Mapping[tuple[str, ...], str] | None = None,
    file: str | None = None,
    what: str = "configuration",
    env_prefix: str | None = None,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> M:
    """Validate merged settings, turning pydantic's error into a :class:`ConfigError`.

    Args:
        model: the settings model.
        data: merged settings (file overlaid with environment).
        origins: field path -> environment variable that set it.
        file: the YAML file the rest came from, if any.
        what: what to call the settings in the error message.
        env_prefix: environment prefix, to say which variable sets a missing field.
        aliases: extra variable names, likewise.
    """
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        errors: list[ConfigFieldError] = []
        for err in exc.errors(include_url=False):
            loc = tuple(p for p in err["loc"] if p not in ("function-after", "function-before"))
            message = err["msg"].removeprefix("Value error, ")
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, FieldValueError):
                loc = (*loc, *cause.field.split("."))
                message = cause.message
            # Our own value errors already quote the value; pydantic's do not.
            if "input" in err and err["type"] not in ("missing", "model_type", "value_error"):
                shown = err["input"]
                if not isinstance(shown, dict | list) and not _is_secret(loc):
                    message += f" (got {shown!r})"
            source = None
            for depth in range(len(loc), 0, -1):
                key = tuple(str(p) for p in loc[:depth])
                if origins and key in origins:
                    source = origins[key]
                    break
            if source is None and file is not None and loc and _in_data(data, loc):
                source = file
            if err["type"] == "missing":
                message += _where_to_set(loc, env_prefix, aliases)
            errors.append(ConfigFieldError(_dotted(loc) or "(top level)", message, source))
        raise ConfigError(f"invalid {what}", errors) from None


def load_settings(
    model: type[P],
    *,
    path: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    file_env: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    what: str = "configuration",
) -> P:
    """Load settings: ``defaults``, then the YAML file, then environment variables.

    Variables are named after ``model.ENV_PREFIX`` plus the field path, or one of
    ``model.ENV_ALIASES``.

    Args:
        model: the settings model.
        path: YAML file, or None for ``env[file_env]`` when that is set, else no file.
        env: the environment to read.
        file_env: variable that names the YAML file when ``path`` is None.
        defaults: values under the file (the file and the environment override them).
        what: what to call the settings in error messages.

    Raises:
        ConfigError: the file cannot be read or a setting is invalid.
    """
    if path is None and file_env and env.get(file_env):
        path = env[file_env]
    data = read_yaml_file(path) if path is not None else {}
    if defaults:
        data = _deep_merge(dict(defaults), data)
    source = FieldPathEnvSource(model, model.ENV_PREFIX, env, aliases=model.ENV_ALIASES)
    data = _deep_merge(data, source())
    return validate_settings(
        model,
        data,
        origins=source.origins,
        file=os.fspath(path) if path is not None else None,
        what=what,
        env_prefix=model.ENV_PREFIX,
        aliases=model.ENV_ALIASES,
    )


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
