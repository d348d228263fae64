"""Hive-style table metadata in AWS Glue, as lakeFS's ``metastore`` package moves it:
copy a table (or every table) so that it points at another branch, import tables into
a repository, compare two tables, point a table at symlink manifests.

Tables and partitions keep Glue's own shapes (``TableInput``, ``PartitionInput``);
only their locations change. A location ``s3://<repository>/<ref>/<path>`` copied
to branch ``b`` becomes ``s3://<repository>/b/<path>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lakectl.config import MetastoreConfig

Transform = Callable[[str], str]

#: a location Spark SQL writes for a data source table, never read (SPARK-15269)
SPARK_PLACEHOLDER_SUFFIX = "-__PLACEHOLDER__"
SPARK_PROVIDER_KEY = "spark.sql.sources.provider"
SPARK_PATH_KEY = "path"

_TABLE_INPUT_KEYS = ("Name", "Description", "Owner", "LastAccessTime", "LastAnalyzedTime",
                     "Retention", "StorageDescriptor", "PartitionKeys", "ViewOriginalText",
                     "ViewExpandedText", "TableType", "Parameters", "TargetTable")
_PARTITION_INPUT_KEYS = ("Values", "LastAccessTime", "StorageDescriptor", "Parameters",
                         "LastAnalyzedTime")
_DATABASE_INPUT_KEYS = ("Name", "Description", "LocationUri", "Parameters",
                        "CreateTableDefaultPermissions", "TargetDatabase")


class MetastoreError(Exception):
    """A metastore operation failed; the message says which and why."""


class SchemaExistsError(MetastoreError):
    """The destination schema exists already."""


def split_location(location: str) -> tuple[str, str, str, str]:
    """``scheme://host/ref/path`` as its four parts."""
    u = urlsplit(location)
    if not u.scheme or not u.netloc:
        raise MetastoreError("got empty schema or host wile parsing location url, location "
                             "should be schema://host/path")
    ref, _, path = u.path.lstrip("/").partition("/")
    return u.scheme, u.netloc, ref, path


def replace_branch_name(location: str, branch: str) -> str:
    """The location on ``branch`` instead of its ref."""
    scheme, host, _, path = split_location(location)
    return f"{scheme}://{host}/{branch}/{path}"


def symlink_location(location: str, prefix: str) -> str:
    """Where the symlink manifests of a table's location are under ``prefix``."""
    _, host, ref, path = split_location(location)
    return f"{prefix}/{host}/{ref}/{path}"


def imported_location(location: str, repository: str, branch: str) -> str:
    """An object store location as it is in ``repository`` on ``branch`` once imported
    (``s3://bucket/path`` -> ``s3://repository/branch/path``)."""
    u = urlsplit(location)
    if not u.scheme or not u.netloc:
        raise MetastoreError("got empty schema or host wile parsing location url, location "
                             "should be schema://host/path")
    return f"{u.scheme}://{repository}/{branch}/{u.path.lstrip('/')}"


def _is_spark_table(table: dict[str, Any]) -> bool:
    return SPARK_PROVIDER_KEY in (table.get("Parameters") or {})


def _update(item: dict[str, Any], serde: str, transform: Transform, spark: bool) -> None:
    """Point a table's or partition's storage at its new place (lakeFS's ``Update``)."""
    sd = item.setdefault("StorageDescriptor", {})
    serde_info = sd.setdefault("SerdeInfo", {})
    if serde:
        serde_info["Name"] = serde
    else:  # Glue takes no empty name
        serde_info.pop("Name", None)
    location = sd.get("Location") or ""
    if location and not (spark and location.endswith(SPARK_PLACEHOLDER_SUFFIX)):
        sd["Location"] = transform(location)
    if spark and SPARK_PATH_KEY in (serde_info.get("Parameters") or {}):
        serde_info["Parameters"][SPARK_PATH_KEY] = transform(
            serde_info["Parameters"][SPARK_PATH_KEY])


def _only(item: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: item[k] for k in keys if k in item}


class GlueMetastore:
    """A Glue Data Catalog (``metastore.glue.*``), read and written with boto3."""

    def __init__(self, config: MetastoreConfig) -> None:
        import boto3

        session = boto3.Session(
            profile_name=config.glue_profile or None,
            aws_access_key_id=config.glue_access_key_id or None,
            aws_secret_access_key=config.glue_secret_access_key or None,
            aws_session_token=config.glue_session_token or None,
            region_name=config.glue_region or None)
        self.client = session.client("glue")
        self.catalog_id = config.glue_catalog_id
        self.db_location_uri = config.glue_db_location_uri
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)

    def _call(self, op: str, **kwargs: Any) -> Any:
        if self.catalog_id:
            kwargs["CatalogId"] = self.catalog_id
        try:
            return getattr(self.client, op)(**kwargs)
        except self._errors as e:
            raise MetastoreError(f"glue {op}: {e}") from None

    def _pages(self, op: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        if self.catalog_id:
            kwargs["CatalogId"] = self.catalog_id
        try:
            for page in self.client.get_paginator(op).paginate(**kwargs):
                yield from page.get(key, [])
        except self._errors as e:
            raise MetastoreError(f"glue {op}: {e}") from None

    # --- reads -------------------------------------------------------------------
    def get_table(self, db: str, table: str) -> dict[str, Any]:
        return dict(self._call("get_table", DatabaseName=db, Name=table)["Table"])

    def has_table(self, db: str, table: str) -> bool:
        try:
            self.get_table(db, table)
        except MetastoreError as e:
            if "EntityNotFoundException" in str(e):
                return False
            raise
        return True

    def get_database(self, name: str) -> dict[str, Any]:
        return dict(self._call("get_database", Name=name)["Database"])

    def get_partitions(self, db: str, table: str) -> list[dict[str, Any]]:
        return list(self._pages("get_partitions", "Partitions", DatabaseName=db,
                                TableName=table))

    def get_partition(self, db: str, table: str, values: Sequence[str]) -> dict[str, Any] | None:
        try:
            return dict(self._call("get_partition", DatabaseName=db, TableName=table,
                                   PartitionValues=list(values))["Partition"])
        except MetastoreError as e:
            if "EntityNotFoundException" in str(e):
                return None
            raise

    def get_databases(self, pattern: str) -> list[dict[str, Any]]:
        return [d for d in self._pages("get_databases", "DatabaseList")
                if re.fullmatch(pattern, d["Name"])]

    def get_tables(self, db: str, pattern: str) -> list[dict[str, Any]]:
        return [t for t in self._pages("get_tables", "TableList", DatabaseName=db)
                if re.fullmatch(pattern, t["Name"])]

    # --- writes ------------------------------------------------------------------
    def create_table(self, db: str, table: dict[str, Any]) -> None:
        self._call("create_table", DatabaseName=db, TableInput=_only(table, _TABLE_INPUT_KEYS))

    def alter_table(self, db: str, table: dict[str, Any]) -> None:
        self._call("update_table", DatabaseName=db, TableInput=_only(table, _TABLE_INPUT_KEYS))

    def add_partitions(self, db: str, table: str, partitions: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(partitions), 100):  # Glue's batch limit
            answer = self._call("batch_create_partition", DatabaseName=db, TableName=table,
                                PartitionInputList=[_only(p, _PARTITION_INPUT_KEYS)
                                                    for p in partitions[start:start + 100]])
            if answer.get("Errors"):
                raise MetastoreError(f"glue batch_create_partition: {answer['Errors'][0]}")

    def alter_partition(self, db: str, table: str, partition: dict[str, Any]) -> None:
        self._call("update_partition", DatabaseName=db, TableName=table,
                   PartitionValueList=partition["Values"],
                   PartitionInput=_only(partition, _PARTITION_INPUT_KEYS))

    def drop_partition(self, db: str, table: str, values: Sequence[str]) -> None:
        self._call("delete_partition", DatabaseName=db, TableName=table,
                   PartitionValues=list(values))

    def create_database(self, database: dict[str, Any], exist_ok: bool) -> None:
        database = {k: v for k, v in database.items() if v not in ("", None)}
        try:
            self._call("create_database", DatabaseInput=_only(database, _DATABASE_INPUT_KEYS))
        except MetastoreError as e:
            if "AlreadyExistsException" not in str(e):
                raise
            if not exist_ok:
                raise SchemaExistsError(f"schema {database['Name']} exists") from None

    def normalize_db_name(self, name: str) -> str:
        return name.replace("-", "_").lower()

    def db_location(self, name: str) -> str:
        return f"{self.db_location_uri.rstrip('/')}/{name}" if self.db_location_uri else ""


# --- operations ---------------------------------------------------------------------
def _partition_name(p: dict[str, Any]) -> str:
    return "-".join(p.get("Values") or [])


def _location(item: dict[str, Any]) -> str:
    return str((item.get("StorageDescriptor") or {}).get("Location") or "")


def copy(table: dict[str, Any], partitions: list[dict[str, Any]], to_db: str, to_table: str,
         serde: str, to: GlueMetastore, transform: Transform) -> None:
    spark = _is_spark_table(table)
    table = {**table, "Name": to_table}
    _update(table, serde, transform, spark)
    for p in partitions:
        _update(p, serde, transform, spark)
    to.create_table(to_db, table)
    to.add_partitions(to_db, to_table, partitions)


def merge(table: dict[str, Any], partitions: list[dict[str, Any]], to_db: str, to_table: str,
          serde: str, to: GlueMetastore, transform: Transform) -> None:
    """Make the destination table the source's: the table itself, then its partitions
    added, changed and dropped."""
    spark = _is_spark_table(table)
    table = {**table, "Name": to_table}
    _update(table, serde, transform, spark)
    existing = {_partition_name(p): p for p in to.get_partitions(to_db, to_table)}
    wanted = {_partition_name(p): p for p in partitions}
    for p in partitions:
        _update(p, serde, transform, spark)
    to.alter_table(to_db, table)
    to.add_partitions(to_db, to_table, [p for n, p in wanted.items() if n not in existing])
    for name, p in wanted.items():
        if name in existing and _location(existing[name]) != _location(p):
            to.alter_partition(to_db, to_table, p)
    for name, p in existing.items():
        if name not in wanted:
            to.drop_partition(to_db, to_table, p["Values"])


def copy_or_merge(source: GlueMetastore, to: GlueMetastore, from_db: str, from_table: str,
                  to_db: str, to_table: str, serde: str, partition: Sequence[str],
                  transform: Transform, table: dict[str, Any] | None = None) -> None:
    """lakeFS's ``CopyOrMerge``: one partition (when given), else the whole table,
    created at the destination or merged into it."""
    table = table or source.get_table(from_db, from_table)
    if partition:
        p = source.get_partition(from_db, from_table, partition)
        if p is None:
            raise MetastoreError(f"partition {list(partition)} not found in "
                                 f"{from_db}.{from_table}")
        _update(p, serde, transform, _is_spark_table(table))
        if to.get_partition(to_db, to_table, partition) is None:
            to.add_partitions(to_db, to_table, [p])
        else:
            to.alter_partition(to_db, to_table, p)
        return
    partitions = source.get_partitions(from_db, from_table)
    if to.has_table(to_db, to_table):
        merge(table, partitions, to_db, to_table, serde, to, transform)
    else:
        copy(table, partitions, to_db, to_table, serde, to, transform)


def copy_all(source: GlueMetastore, to: GlueMetastore, schema_filter: str, table_filter: str,
             transform: Transform, continue_on_error: bool,
             report: Callable[[str], None]) -> None:
    """Every table of every schema matching the filters, copied or merged."""
    for database in source.get_databases(schema_filter):
        from_db = database["Name"]
        to_db = to.normalize_db_name(from_db)
        to.create_database({**database, "Name": to_db, "LocationUri": to.db_location(to_db)},
                           exist_ok=True)
        for table in source.get_tables(from_db, table_filter):
            name = table["Name"]
            report(f"copy table {from_db}.{name} -> {to_db}.{name}")
            try:
                copy_or_merge(source, to, from_db, name, to_db, name, name, (), transform,
                              table=table)
            except MetastoreError as e:
                if not continue_on_error:
                    raise
                report(str(e))


def copy_db(source: GlueMetastore, to: GlueMetastore, from_db: str, to_db: str,
            branch: str) -> None:
    """A new schema ``to_db`` like ``from_db``, located on ``branch``.

    Raises:
        SchemaExistsError: ``to_db`` exists.
    """
    database = source.get_database(from_db)
    location = database.get("LocationUri") or ""
    if location:
        location = replace_branch_name(location, branch)
    to.create_database({**database, "Name": to_db, "LocationUri": location}, exist_ok=False)


@dataclass(frozen=True)
class Difference:
    kind: str  # "+", "-" or "~"
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def _diff(a: dict[str, str], b: dict[str, str]) -> list[Difference]:
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            out.append(Difference("+", name))
        elif name not in a:
            out.append(Difference("-", name))
        elif a[name] != b[name]:
            out.append(Difference("~", name))
    return out


def column_diff(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    def columns(t: dict[str, Any]) -> dict[str, str]:
        return {c["Name"]: c.get("Type", "") for c in
                (t.get("StorageDescriptor") or {}).get("Columns") or []}
    return _diff(columns(a), columns(b))


def partition_diff(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[Difference]:
    return _diff({_partition_name(p): _location(p) for p in a},
                 {_partition_name(p): _location(p) for p in b})


__all__ = ["Difference", "GlueMetastore", "MetastoreError", "SchemaExistsError",
           "column_diff", "copy_all", "copy_db", "copy_or_merge", "imported_location",
           "partition_diff", "replace_branch_name", "split_location", "symlink_location"]
