"""The ``mirrors_database`` configuration section.

Same shape as the replication service's YAML::

    mirrors_database:
      type: dynamodb            # dynamodb | postgres | sqlite (lakeFS' "local" = sqlite)
      dynamodb:
        table_name: lakefs-replication-table
        aws_region: us-east-1
        endpoint_url: http://localhost:8000   # optional ("endpoint" also accepted)
      postgres:
        connection_string: postgres://user:pass@host:5432/db
      sqlite:
        path: ~/lakefs/mirrors.db

The models are frozen pydantic models, so the replication settings can nest
``MirrorsDatabaseConfig`` directly (and read it from ``REPLICATION_`` variables).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from mirrors_db.errors import MirrorsDatabaseConfigError
from mirrors_db.models import MAX_PAGE_SIZE

DEFAULT_SQLITE_PATH = "~/lakefs/mirrors.db"
DEFAULT_LIST_MIRRORS_PAGE_SIZE = 1000


class MirrorsDatabaseType(StrEnum):
    """Backends of the mirrors table."""

    DYNAMODB = "dynamodb"
    POSTGRES = "postgres"
    SQLITE = "sqlite"


#: Spellings accepted for ``type`` besides the enum values.
_TYPE_ALIASES = {"local": "sqlite", "postgresql": "postgres", "cockroachdb": "postgres"}


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class DynamoDBMirrorsConfig(_Section):
    """``mirrors_database.dynamodb``.

    Attributes:
        table_name: The (global) table; created with streams on startup if missing.
        aws_region: Region of the table replica this installation talks to. When
            unset, the AWS default chain (``AWS_REGION``, profile) decides.
        endpoint_url: Another endpoint (DynamoDB Local, moto); ``endpoint`` is
            accepted as in lakeFS' database config.
        aws_profile: A named profile from the shared AWS config files.
        aws_access_key_id: Static credentials; when unset, the default chain.
        aws_secret_access_key: Static credentials.
        aws_session_token: Optional session token for the static credentials.
    """

    table_name: str = Field(min_length=3, max_length=255)
    aws_region: str | None = None
    endpoint_url: str | None = Field(
        default=None, validation_alias=AliasChoices("endpoint_url", "endpoint")
    )
    aws_profile: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: SecretStr | None = None
    aws_session_token: SecretStr | None = None


class PostgresMirrorsConfig(_Section):
    """``mirrors_database.postgres`` (PostgreSQL or CockroachDB).

    Attributes:
        connection_string: ``postgres://``/``postgresql://`` URI as lakeFS takes it,
            or a SQLAlchemy ``postgresql+psycopg://`` URL.
        max_open_connections: Upper bound of pooled connections per process.
        connect_timeout: Seconds to wait for a connection before failing.
    """

    connection_string: SecretStr
    max_open_connections: int = Field(default=25, ge=1, le=1000)
    connect_timeout: int = Field(default=10, ge=1, le=600)


class SQLiteMirrorsConfig(_Section):
    """``mirrors_database.sqlite``: one file, shared by the processes of one machine.

    Attributes:
        path: the SQLite file (``~`` expanded); every region on the machine names the
            same file.
    """

    path: str = DEFAULT_SQLITE_PATH


class MirrorsDatabaseConfig(_Section):
    """The whole ``mirrors_database`` section.

    Attributes:
        type: Which backend; the section of the same name configures it.
        list_mirrors_page_size: Default page size of mirror listings
            (``list_mirrors_page_size`` at the top of the replication config).
    """

    type: MirrorsDatabaseType = MirrorsDatabaseType.SQLITE
    dynamodb: DynamoDBMirrorsConfig | None = None
    postgres: PostgresMirrorsConfig | None = None
    sqlite: SQLiteMirrorsConfig = SQLiteMirrorsConfig()
    list_mirrors_page_size: int = Field(default=DEFAULT_LIST_MIRRORS_PAGE_SIZE, ge=1,
                                        le=MAX_PAGE_SIZE)

    @field_validator("type", mode="before")
    @classmethod
    def _type_alias(cls, value: Any) -> Any:
        if isinstance(value, str):
            lowered = value.strip().lower()
            value = _TYPE_ALIASES.get(lowered, lowered)
            if value not in {t.value for t in MirrorsDatabaseType}:
                known = ", ".join(sorted([*(t.value for t in MirrorsDatabaseType), "local"]))
                raise ValueError(f"unknown mirrors database type {value!r} (known: {known})")
        return value

    @model_validator(mode="after")
    def _section_present(self) -> MirrorsDatabaseConfig:
        if self.type is MirrorsDatabaseType.DYNAMODB and self.dynamodb is None:
            raise ValueError("type is dynamodb but the dynamodb section (table_name) is missing")
        if self.type is MirrorsDatabaseType.POSTGRES and self.postgres is None:
            raise ValueError(
                "type is postgres but the postgres section (connection_string) is missing"
            )
        return self

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> MirrorsDatabaseConfig:
        """Parse a ``mirrors_database`` mapping (from YAML or JSON).

        Raises:
            MirrorsDatabaseConfigError: With every problem, one per line, each
                prefixed by its dotted path (``mirrors_database.dynamodb.table_name``).
        """
        if not isinstance(data, Mapping):
            raise MirrorsDatabaseConfigError("mirrors_database must be a mapping")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise MirrorsDatabaseConfigError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """A short, readable multi-line account of a pydantic validation error."""
    lines = ["invalid mirrors_database configuration:"]
    for err in exc.errors(include_url=False, include_input=False):
        path = ".".join(["mirrors_database", *(str(p) for p in err["loc"])])
        message = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"  {path}: {message}")
    return "\n".join(lines)
