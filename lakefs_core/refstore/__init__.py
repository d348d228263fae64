"""The refstore: repositories, branches, tags, commits and staged entries.

:func:`open_refstore` opens one by lakeFS's ``database.type``; each type has a lazy
loader, so a database driver is imported only when its type is chosen.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from lakefs_core.database import local_database_url, postgres_url
from lakefs_core.errors import DatabaseError, ValidationError
from lakefs_core.refstore.base import RefStore

if TYPE_CHECKING:
    from lakefs_core.refstore.sql import SQLRefStore

__all__ = ["DatabaseType", "RefStore", "SQLRefStore", "local_database_url", "open_database",
           "open_refstore", "postgres_url"]

class DatabaseType(StrEnum):
    """lakeFS ``database.type`` values that this server supports."""

    LOCAL = "local"  # an SQLite file on this machine
    POSTGRES = "postgres"
    DYNAMODB = "dynamodb"


def _open_local(sqlite_path: str | None, connection_string: str | None,
                dynamodb: Mapping[str, Any]) -> RefStore:
    if not sqlite_path:
        raise ValidationError("database type 'local' needs database.local.path")
    from lakefs_core.refstore.sql import SQLRefStore

    return SQLRefStore(local_database_url(sqlite_path))


def _open_postgres(sqlite_path: str | None, connection_string: str | None,
                   dynamodb: Mapping[str, Any]) -> RefStore:
    if not connection_string:
        raise ValidationError("database type 'postgres' needs database.postgres.connection_string")
    url = postgres_url(connection_string)
    if importlib.util.find_spec("psycopg") is None:
        raise DatabaseError("the PostgreSQL driver is not installed: pip install 'psycopg[binary]'")
    from lakefs_core.refstore.sql import SQLRefStore

    return SQLRefStore(url)


def _open_dynamodb(sqlite_path: str | None, connection_string: str | None,
                   dynamodb: Mapping[str, Any]) -> RefStore:
    if not dynamodb.get("table_name"):
        raise ValidationError("database type 'dynamodb' needs database.dynamodb.table_name")
    from lakefs_core.refstore.dynamodb import DynamoDBRefStore

    return DynamoDBRefStore(**dynamodb)


_LOADERS: dict[DatabaseType,
               Callable[[str | None, str | None, Mapping[str, Any]], RefStore]] = {
    DatabaseType.LOCAL: _open_local,
    DatabaseType.POSTGRES: _open_postgres,
    DatabaseType.DYNAMODB: _open_dynamodb,
}


def open_refstore(db_type: str, *, sqlite_path: str | None = None,
                  connection_string: str | None = None,
                  dynamodb: Mapping[str, Any] | None = None) -> RefStore:
    """Open (and create the schema of) the refstore for a lakeFS ``database.type``.

    Args:
        db_type: ``local`` (an SQLite file), ``postgres`` or ``dynamodb``.
        sqlite_path: for ``local``: the database file, or a directory to hold
            ``refstore.db``; ``~`` is expanded and missing directories are created.
        connection_string: for ``postgres``: a ``postgres://`` or ``postgresql://`` URL.
        dynamodb: for ``dynamodb``: the keyword arguments of
            :class:`~lakefs_core.refstore.dynamodb.DynamoDBRefStore` (``table_name``...).

    Raises:
        ValidationError: unknown type or missing/malformed location.
        DatabaseError: the database cannot be reached or initialized.
    """
    try:
        loader = _LOADERS[DatabaseType(db_type)]
    except ValueError:
        valid = ", ".join(t.value for t in DatabaseType)
        raise ValidationError(
            f"unknown database type {db_type!r}; valid types: {valid}") from None
    return loader(sqlite_path, connection_string, dynamodb or {})


def open_database(url: str) -> RefStore:
    """Open (and create the schema of) the refstore at a SQLAlchemy URL.

    Args:
        url: ``sqlite:///path/to/file.db`` or ``postgresql+psycopg://...`` (see
            :func:`local_database_url` and :func:`postgres_url`).

    Raises:
        ValidationError: an unsupported URL.
        DatabaseError: the database cannot be reached or initialized.
    """
    if url.startswith("postgresql") and importlib.util.find_spec("psycopg") is None:
        raise DatabaseError("the PostgreSQL driver is not installed: pip install 'psycopg[binary]'")
    from lakefs_core.refstore.sql import SQLRefStore

    return SQLRefStore(url)


def __getattr__(name: str) -> Any:
    if name == "SQLRefStore":
        from lakefs_core.refstore.sql import SQLRefStore

        return SQLRefStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
