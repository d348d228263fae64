"""Opening the auth store of a ``database`` settings block.

The auth store lives in the server's database: with ``database.type`` ``local`` the
SQLite file of ``database.local.path``, with ``postgres`` the PostgreSQL database, with
``dynamodb`` the DynamoDB table of ``database.dynamodb`` (beside the refstore's
records). Every process of an installation (server processes, the replication
service) opens it with :func:`open_auth_store` from the same settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakefs_core.auth.base import BaseAuthStore
from lakefs_core.database import local_database_url, postgres_url
from lakefs_core.errors import ValidationError

if TYPE_CHECKING:
    from lakefs_core.config import DatabaseConfig


def open_auth_store(database: DatabaseConfig, secret_key: str | bytes, *,
                    data_dir: str | None = None) -> BaseAuthStore:
    """The auth store in the database that ``database`` (the server's ``database``
    block) names, its tables or table created when missing.

    Args:
        database: the ``database`` settings (``type`` local, postgres or dynamodb).
        secret_key: ``auth.encrypt.secret_key``, which encrypts stored secrets.
        data_dir: where the SQLite file is when ``database.local.path`` is unset.

    Raises:
        ValidationError: the settings name no database.
        DatabaseError: the database cannot be reached or initialized.
    """
    if database.type == "dynamodb":
        from lakefs_core.auth.dynamodb_store import DynamoDBAuthStore
        from lakefs_core.dynamodb_table import table_options

        options = table_options(database.dynamodb)
        return DynamoDBAuthStore(options.pop("table_name"), secret_key, **options)
    from lakefs_core.auth.store import AuthStore

    if database.type == "postgres":
        cs = database.postgres.connection_string
        if cs is None:
            raise ValidationError("database.postgres.connection_string is required")
        return AuthStore(postgres_url(cs.get_secret_value()), secret_key)
    path = database.local.path or data_dir
    if not path:
        raise ValidationError("database.local.path is required")
    return AuthStore(local_database_url(path), secret_key)
