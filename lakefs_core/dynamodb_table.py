"""The server's DynamoDB table (``database.dynamodb``): connecting, creating, calling.

One table with a string partition key ``pk`` and sort key ``sk`` holds the metadata of
``database.type: dynamodb``: the refstore's partitions (``repos``, ``repo#<id>``) and
the auth store's (``auth#...``). :class:`DynamoDBTable` is what both stores share: the
boto3 client, the table created when missing, errors turned into :mod:`lakefs_core.errors`
types, Query paging in key order, transactions and batches.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from lakefs_core.errors import DatabaseError, ValidationError

_log = logging.getLogger(__name__)

PK, SK = "pk", "sk"
ABSENT = "attribute_not_exists(sk)"
PRESENT = "attribute_exists(sk)"
#: operations of one TransactWriteItems
TRANSACTION_LIMIT = 100
BATCH_WRITE_LIMIT = 25
BATCH_GET_LIMIT = 100
_UNREACHABLE = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
)
#: boto3 sessions are not safe for concurrent client creation
_SESSION_LOCK = threading.Lock()


class TransactionConflict(Exception):
    """Another transaction touched the same items at the same time (retried)."""


def s(value: str) -> dict[str, str]:
    return {"S": value}


def key(pk: str, sk: str) -> dict[str, Any]:
    return {PK: s(pk), SK: s(sk)}


def dump(value: Any) -> dict[str, str]:
    return s(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def load(item: Mapping[str, Any]) -> Any:
    return json.loads(item["v"]["S"])


def code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def table_options(ddb: Any) -> dict[str, Any]:
    """The ``database.dynamodb`` settings (a
    :class:`~lakefs_core.config.DynamoDBDatabaseConfig`) as :meth:`DynamoDBTable._connect`'s
    keyword arguments."""
    secret = ddb.aws_secret_access_key
    return {"table_name": ddb.table_name, "endpoint": ddb.endpoint or None,
            "region": ddb.aws_region or None, "profile": ddb.aws_profile or None,
            "access_key_id": ddb.aws_access_key_id or None,
            "secret_access_key": None if secret is None else secret.get_secret_value() or None,
            "read_capacity_units": ddb.read_capacity_units,
            "write_capacity_units": ddb.write_capacity_units, "scan_limit": ddb.scan_limit}


class DynamoDBTable:
    """Access to one ``pk``/``sk`` table; stores on it call :meth:`_connect` first."""

    _table: str
    _scan_limit: int
    _capacity: tuple[int | None, int | None]
    _where: str
    _client: Any

    def _connect(self, table_name: str, *, endpoint: str | None = None,
                 region: str | None = None, profile: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 read_capacity_units: int | None = None,
                 write_capacity_units: int | None = None,
                 scan_limit: int = 1024, create_table: bool = True) -> None:
        """Make the client and create the table if missing (see the stores' Args);
        with ``create_table`` False a missing table is a DatabaseError.

        Raises:
            ValidationError: bad settings (capacity given for one direction only...).
            DatabaseError: the table cannot be reached, created or used.
        """
        if (read_capacity_units is None) != (write_capacity_units is None):
            raise ValidationError("database.dynamodb: set both read_capacity_units and "
                                  "write_capacity_units (provisioned), or neither (on-demand)")
        if scan_limit < 1:
            raise ValidationError(f"scan_limit must be positive, got {scan_limit}")
        if not table_name:
            raise ValidationError("database.dynamodb.table_name is required")
        self._table = table_name
        self._scan_limit = scan_limit
        self._capacity = (read_capacity_units, write_capacity_units)
        self._where = f"DynamoDB table {table_name!r}" + (f" at {endpoint}" if endpoint else "")
        try:
            with _SESSION_LOCK:
                session = boto3.session.Session(profile_name=profile)
                if (region or session.region_name) is None:
                    raise ValidationError("database.dynamodb.aws_region is not set and no "
                                          "AWS region is configured")
                self._client = session.client(
                    "dynamodb", region_name=region or session.region_name,
                    endpoint_url=endpoint, aws_access_key_id=access_key_id,
                    aws_secret_access_key=secret_access_key,
                    config=Config(connect_timeout=5, read_timeout=30,
                                  max_pool_connections=50,
                                  retries={"max_attempts": 4, "mode": "standard"}))
        except botocore.exceptions.ProfileNotFound as exc:
            raise ValidationError(f"database.dynamodb.aws_profile: {exc}") from None
        try:
            self._ensure_table(create_table)
        except BaseException:
            self._client.close()
            raise

    @property
    def client(self) -> Any:
        """The boto3 DynamoDB client (for diagnostics and instrumentation)."""
        return self._client

    @property
    def table_name(self) -> str:
        return self._table

    def close(self) -> None:
        self._client.close()

    def _call(self, operation: str, expect: str | tuple[str, ...] = "",
              **kwargs: Any) -> dict[str, Any]:
        """Run one DynamoDB operation; failures become DatabaseError, except a
        ClientError whose code is ``expect`` (or one of them), re-raised for the caller."""
        try:
            result: dict[str, Any] = getattr(self._client, operation)(**kwargs)
            return result
        except _UNREACHABLE as exc:
            raise DatabaseError(f"cannot reach {self._where}: {exc}") from None
        except botocore.exceptions.NoCredentialsError:
            raise DatabaseError(f"no AWS credentials for {self._where}: set "
                                "database.dynamodb credentials or the AWS environment") from None
        except botocore.exceptions.ClientError as exc:
            if expect and code(exc) in ((expect,) if isinstance(expect, str) else expect):
                raise
            if code(exc) == "ValidationException":
                raise ValidationError(f"{self._where} refused {operation}: "
                                      f"{exc.response.get('Error', {}).get('Message')}") from None
            raise DatabaseError(f"{self._where}: {operation} failed: {exc}") from None

    def _ensure_table(self, create: bool = True) -> None:
        try:
            desc = self._call("describe_table", "ResourceNotFoundException",
                              TableName=self._table)["Table"]
        except botocore.exceptions.ClientError:
            if not create:
                raise DatabaseError(
                    f"{self._where} does not exist (the lakeFS server creates it when it "
                    "first starts): check table_name, endpoint and aws_region, or start "
                    "the server first") from None
            desc = self._create_table()
        if desc.get("TableStatus") != "ACTIVE":
            self._client.get_waiter("table_exists").wait(
                TableName=self._table, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
            desc = self._call("describe_table", TableName=self._table)["Table"]
        keys = {(k["AttributeName"], k["KeyType"]) for k in desc.get("KeySchema", [])}
        if keys != {(PK, "HASH"), (SK, "RANGE")}:
            raise DatabaseError(f"{self._where} exists but its key schema is {sorted(keys)}, "
                                f"not {PK} (HASH) + {SK} (RANGE)")

    def _create_table(self) -> dict[str, Any]:
        rcu, wcu = self._capacity
        billing: dict[str, Any] = {"BillingMode": "PAY_PER_REQUEST"}
        if rcu is not None and wcu is not None:
            billing = {"BillingMode": "PROVISIONED", "ProvisionedThroughput": {
                "ReadCapacityUnits": rcu, "WriteCapacityUnits": wcu}}
        _log.info("creating the metadata table", extra={"table": self._table, **billing})
        try:
            return self._call(
                "create_table", "ResourceInUseException", TableName=self._table,
                AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                                      for a in (PK, SK)],
                KeySchema=[{"AttributeName": PK, "KeyType": "HASH"},
                           {"AttributeName": SK, "KeyType": "RANGE"}],
                **billing)["TableDescription"]
        except botocore.exceptions.ClientError:  # another process created it first
            return {"TableStatus": "CREATING"}

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._call(
            "get_item", TableName=self._table, Key=key(pk, sk), ConsistentRead=True
        ).get("Item")
        return item

    def _query(self, pk: str, kind: str, prefix: str = "", after: str = "",
               limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Items of partition ``pk`` whose sort key is ``kind + key``, ``key`` starting
        with ``prefix`` and greater than ``after``, in key order, page by page."""
        start = kind + prefix
        if after and kind + after >= start:
            cond, bound = "pk = :p AND sk > :b", kind + after
        else:
            cond, bound = "pk = :p AND sk >= :b", start
        values = {":p": s(pk), ":b": s(bound)}
        if not bound:  # the whole partition (a key is never empty)
            cond = "pk = :p"
            del values[":b"]
        args: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": cond, "ConsistentRead": True,
            "ExpressionAttributeValues": values}
        remaining = limit
        while remaining is None or remaining > 0:
            page_size = self._scan_limit if remaining is None else min(self._scan_limit,
                                                                      remaining)
            page = self._call("query", Limit=page_size, **args)
            for item in page.get("Items", []):
                if not item[SK]["S"].startswith(start):
                    return
                yield item
                if remaining is not None:
                    remaining -= 1
            if "LastEvaluatedKey" not in page:
                return
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    @staticmethod
    def _name(item: Mapping[str, Any], kind: str) -> str:
        return str(item[SK]["S"])[len(kind):]

    @retry(retry=retry_if_exception_type(TransactionConflict), stop=stop_after_attempt(8),
           wait=wait_random_exponential(multiplier=0.01, max=0.5), reraise=True)
    def _transact(self, items: list[dict[str, Any]]) -> list[bool] | None:
        """Run a transaction; None on success, else which operations' conditions failed."""
        try:
            self._call("transact_write_items", "TransactionCanceledException",
                       TransactItems=items)
            return None
        except botocore.exceptions.ClientError as exc:
            reasons: list[dict[str, Any]] = list(
                exc.response.get("CancellationReasons", []))  # type: ignore[arg-type]
            codes = [r.get("Code") for r in reasons]
            if "TransactionConflict" in codes:
                raise TransactionConflict(str(exc)) from None
            failed = [c == "ConditionalCheckFailed" for c in codes]
            if not any(failed):
                raise DatabaseError(f"{self._where}: transaction cancelled: {codes}") from None
            return failed + [False] * (len(items) - len(failed))

    def _put(self, item: dict[str, Any], condition: str = "") -> dict[str, Any]:
        op: dict[str, Any] = {"TableName": self._table, "Item": item}
        if condition:
            op["ConditionExpression"] = condition
        return {"Put": op}

    def _delete(self, pk: str, sk: str, condition: str = "") -> dict[str, Any]:
        op: dict[str, Any] = {"TableName": self._table, "Key": key(pk, sk)}
        if condition:
            op["ConditionExpression"] = condition
        return {"Delete": op}

    def _batch_delete(self, keys: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(keys), BATCH_WRITE_LIMIT):
            pending: dict[str, Any] = {self._table: [
                {"DeleteRequest": {"Key": k}} for k in keys[start:start + BATCH_WRITE_LIMIT]]}
            for attempt in range(10):
                if not pending:
                    break
                if attempt:
                    time.sleep(min(1.0, 0.05 * 2 ** attempt))  # throttled: back off
                pending = self._call("batch_write_item",
                                     RequestItems=pending).get("UnprocessedItems") or {}
            if pending:
                raise DatabaseError(f"{self._where} kept throttling a batch delete")

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items of ``keys`` that exist (at most 100 keys), in no particular order."""
        items: list[dict[str, Any]] = []
        pending: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
        for attempt in range(10):
            if not pending:
                return items
            if attempt:
                time.sleep(min(1.0, 0.05 * 2 ** attempt))  # throttled: back off
            page = self._call("batch_get_item", RequestItems=pending)
            items += page["Responses"].get(self._table, [])
            pending = page.get("UnprocessedKeys") or {}
        raise DatabaseError(f"{self._where} kept throttling a batch read")
