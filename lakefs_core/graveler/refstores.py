"""The refstore that a lakeFS ``database`` settings block names.

One opener for every process over a region's metadata: the server
(``database``) and the replication service (``refstore_database``), so both read
the same SQLite file, PostgreSQL database or DynamoDB table from the same settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakefs_core.refstore import open_refstore
from lakefs_core.refstore.base import RefStore

if TYPE_CHECKING:
    from lakefs_core.config import DatabaseConfig, DynamoDBDatabaseConfig


def dynamodb_options(ddb: DynamoDBDatabaseConfig) -> dict[str, Any]:
    """A ``dynamodb`` settings block as the DynamoDB refstore's arguments."""
    from lakefs_core.dynamodb_table import table_options  # boto3: only for this type

    return table_options(ddb)


def open_refstore_for(database: DatabaseConfig, *, create_table: bool = True) -> RefStore:
    """Open (and create the schema of) the refstore ``database`` names.

    Args:
        database: the settings block.
        create_table: create a DynamoDB table that does not exist (the server); when
            False, a missing table is an error (the replication service, which must
            find the server's table, not make an empty one of a mistyped name).

    Raises:
        ValidationError: the block lacks what its type needs.
        DatabaseError: the database cannot be reached or initialized.
    """
    if database.type == "postgres":
        cs = database.postgres.connection_string
        return open_refstore("postgres",
                             connection_string=None if cs is None else cs.get_secret_value())
    if database.type == "dynamodb":
        return open_refstore("dynamodb", dynamodb={**dynamodb_options(database.dynamodb),
                                                   "create_table": create_table})
    return open_refstore("local", sqlite_path=database.local.path)
