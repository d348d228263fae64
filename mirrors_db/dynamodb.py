"""Mirrors table on DynamoDB (a global table when regions share it), via boto3.

One table, partition key ``organization_id``, sort key ``row_id``:

* ``mirror#<id>``: a mirror. Its written-once fields live in one JSON attribute
  ``spec``; ``state``, ``error``, ``updated_at`` and ``version`` are attributes of
  their own, so updates touch only what changes. ``by_source`` and
  ``by_destination`` feed two sparse global secondary indexes of the same names.
* ``branch#<mirror_id>#<branch>``: branch progress.
* ``lease#<name>``: a lease.
* ``name#<destination_region>#<name>`` and ``namespace#<storage_namespace>``:
  uniqueness guards of live mirrors, written and removed in the same
  TransactWriteItems as the mirror itself.

Every write carries a ConditionExpression on ``version``. Transactions are
atomic within one region; on a global table, two regions can both win
concurrent writes to one item (last writer wins), which is why each row kind has
a single writing region (see ``mirrors_db.models``).

The change feed reads the table's stream (NEW_AND_OLD_IMAGES), one iterator per
open shard, starting at LATEST.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NoReturn

import boto3
import botocore.exceptions
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from mirrors_db.codec import (
    branch_from_dict,
    branch_to_dict,
    lease_from_dict,
    mirror_from_dict,
    to_micros,
)
from mirrors_db.config import DynamoDBMirrorsConfig
from mirrors_db.errors import (
    BranchProgressNotFoundError,
    InvalidStateTransitionError,
    LeaseHeldError,
    LeaseLostError,
    MalformedRowError,
    MirrorExistsError,
    MirrorNotFoundError,
    MirrorsDatabaseConfigError,
    MirrorsDatabaseError,
    MirrorsDatabaseUnavailableError,
    VersionConflictError,
)
from mirrors_db.models import (
    ChangeEvent,
    Clock,
    Lease,
    Mirror,
    MirrorBranch,
    MirrorState,
    RowKind,
    check_branch_key,
    check_key_part,
    check_text,
)
from mirrors_db.table import ALL_KINDS, ChangeFeed, MirrorFilter, MirrorsTable

log = logging.getLogger(__name__)

PK = "organization_id"
SK = "row_id"
BY_SOURCE = "by_source"
BY_DESTINATION = "by_destination"

_MIRROR = "mirror#"
_BRANCH = "branch#"
_LEASE = "lease#"
_NAME = "name#"
_NAMESPACE = "namespace#"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

#: What mirror reads fetch: everything but the index keys, which are derived.
_MIRROR_ATTRIBUTES = (PK, SK, "spec", "state", "error", "updated_at", "version")
_MIRROR_NAMES = {f"#a{i}": a for i, a in enumerate(_MIRROR_ATTRIBUTES)}
_MIRROR_PROJECTION: dict[str, Any] = {
    "ProjectionExpression": ", ".join(_MIRROR_NAMES),
    "ExpressionAttributeNames": _MIRROR_NAMES,
}

_CONDITION_FAILED = "ConditionalCheckFailedException"

_UNREACHABLE = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
)


def _ser(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in item.items() if v is not None}


def _deser(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _old_item(exc: botocore.exceptions.ClientError) -> dict[str, Any] | None:
    """The item a failed condition saw (ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    item = exc.response.get("Item")
    return item if isinstance(item, dict) else None


class _TransactionConflict(VersionConflictError):
    """Another transaction was in flight on one of the items (retried a few times)."""


# --- item codecs ---------------------------------------------------------------------
def _mirror_item(m: Mirror) -> dict[str, Any]:
    spec = {
        "name": m.name,
        "source_region": m.source_region,
        "source_repository": m.source_repository,
        "destination_region": m.destination_region,
        "storage_namespace": m.storage_namespace,
        "created_at": to_micros(m.created_at),
    }
    return {
        PK: m.organization_id,
        SK: _MIRROR + m.id,
        "spec": json.dumps(spec, separators=(",", ":"), ensure_ascii=False),
        "state": m.state.value,
        "error": m.error or None,
        "updated_at": to_micros(m.updated_at),
        "version": m.version,
        BY_SOURCE: f"{m.organization_id}#{m.source_region}#{m.source_repository}",
        BY_DESTINATION: f"{m.organization_id}#{m.destination_region}",
    }


def _mirror_from_item(item: dict[str, Any]) -> Mirror:
    key = f"{item.get(PK)}/{item.get(SK)}"
    try:
        spec = json.loads(item["spec"])
        if not isinstance(spec, dict):
            raise TypeError("spec is not an object")
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedRowError(key, f"bad spec attribute: {exc}") from None
    data = {
        **spec,
        "organization_id": item.get(PK),
        "id": str(item.get(SK, ""))[len(_MIRROR):],
        "state": item.get("state"),
        "error": item.get("error"),
        "updated_at": item.get("updated_at"),
        "version": item.get("version"),
    }
    return mirror_from_dict(data, key)


def _branch_item(p: MirrorBranch) -> dict[str, Any]:
    data = branch_to_dict(p)
    data["error"] = p.error or None
    return {**data, SK: f"{_BRANCH}{p.mirror_id}#{p.branch}"}


def _branch_key(org: str, mirror_id: str, branch: str) -> dict[str, Any]:
    return _ser({PK: org, SK: f"{_BRANCH}{mirror_id}#{branch}"})


def _name_guard(m: Mirror) -> dict[str, Any]:
    return _ser({PK: m.organization_id, SK: f"{_NAME}{m.destination_region}#{m.name}"})


def _namespace_guard(m: Mirror) -> dict[str, Any]:
    return _ser({PK: m.organization_id, SK: _NAMESPACE + m.storage_namespace})


def _event_from_record(record: dict[str, Any]) -> ChangeEvent | None:
    """A change event from a stream record; None for guard items."""
    data = record["dynamodb"]
    keys = _deser(data["Keys"])
    org, row_id = str(keys[PK]), str(keys[SK])
    deleted = record.get("eventName") == "REMOVE"
    image = None if deleted else _deser(data.get("NewImage", {}))
    if row_id.startswith(_MIRROR):
        row: Any = None if image is None else _mirror_from_item(image)
        return ChangeEvent(RowKind.MIRROR, org, (row_id[len(_MIRROR):],), deleted, row)
    if row_id.startswith(_BRANCH):
        mirror_id, _, branch = row_id[len(_BRANCH):].partition("#")
        row = None if image is None else branch_from_dict(image, f"{org}/{row_id}")
        return ChangeEvent(RowKind.BRANCH, org, (mirror_id, branch), deleted, row)
    if row_id.startswith(_LEASE):
        row = None if image is None else lease_from_dict(image, f"{org}/{row_id}")
        return ChangeEvent(RowKind.LEASE, org, (row_id[len(_LEASE):],), deleted, row)
    return None


class DynamoDBMirrorsTable(MirrorsTable):
    """Mirrors table on DynamoDB; the table is created on startup if missing.

    Args:
        config: The ``mirrors_database.dynamodb`` section.
        page_size: Default listing page size.
        clock: Time source (lease expiry, ``updated_at``).
    """

    def __init__(
        self, config: DynamoDBMirrorsConfig, *, page_size: int, clock: Clock | None = None
    ) -> None:
        super().__init__(page_size=page_size, clock=clock)
        self._table = config.table_name
        self._where = f"DynamoDB table {config.table_name!r}" + (
            f" at {config.endpoint_url}" if config.endpoint_url else ""
        )
        try:
            session = _session(config.aws_profile)
            region = config.aws_region or session.region_name
        except botocore.exceptions.ProfileNotFound as exc:
            raise MirrorsDatabaseConfigError(f"mirrors_database.dynamodb: {exc}") from None
        if region is None:
            raise MirrorsDatabaseConfigError(
                "mirrors_database.dynamodb.aws_region is not set and no AWS region is configured"
            )
        client_args: dict[str, Any] = {
            "region_name": region,
            "endpoint_url": config.endpoint_url,
            "aws_access_key_id": config.aws_access_key_id,
            "aws_secret_access_key": _secret(config.aws_secret_access_key),
            "aws_session_token": _secret(config.aws_session_token),
            "config": Config(connect_timeout=5, read_timeout=30, max_pool_connections=50,
                             retries={"max_attempts": 4, "mode": "standard"}),
        }
        with _SESSION_LOCK:  # boto3 sessions are not safe for concurrent client creation
            self._client = session.client("dynamodb", **client_args)
            self._streams = session.client("dynamodbstreams", **client_args)
        try:
            self._stream_arn = self._ensure_table()
        except (MirrorsDatabaseConfigError, MirrorsDatabaseUnavailableError):
            raise
        except MirrorsDatabaseError as exc:
            raise MirrorsDatabaseConfigError(f"cannot use {self._where}: {exc}") from None

    # --- plumbing ------------------------------------------------------------------------
    def _call(self, operation: str, expect: str = "", **kwargs: Any) -> dict[str, Any]:
        """Run one DynamoDB operation, translating failures into mirrors_db errors.

        A ClientError whose code is ``expect`` is re-raised for the caller to handle.
        """
        try:
            result: dict[str, Any] = getattr(self._client, operation)(**kwargs)
            return result
        except _UNREACHABLE as exc:
            raise MirrorsDatabaseUnavailableError(f"cannot reach {self._where}: {exc}") from None
        except botocore.exceptions.NoCredentialsError:
            raise MirrorsDatabaseConfigError(
                f"no AWS credentials for {self._where}; set mirrors_database.dynamodb "
                "credentials or the AWS environment"
            ) from None
        except botocore.exceptions.ClientError as exc:
            if expect and _code(exc) == expect:
                raise
            if _code(exc) in ("UnrecognizedClientException", "AccessDeniedException",
                              "InvalidSignatureException"):
                raise MirrorsDatabaseConfigError(
                    f"{self._where} refused the credentials: {exc}") from None
            raise MirrorsDatabaseError(f"{self._where}: {operation} failed: {exc}") from None

    @retry(retry=retry_if_exception_type(_TransactionConflict), stop=stop_after_attempt(5),
           wait=wait_exponential(multiplier=0.02, max=1.0), reraise=True)
    def _transact(self, items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Run a transaction; return the cancellation reasons if it was cancelled."""
        try:
            self._call("transact_write_items", "TransactionCanceledException",
                       TransactItems=items)
            return None
        except botocore.exceptions.ClientError as exc:
            reasons: list[dict[str, Any]] = list(
                exc.response.get("CancellationReasons", []))  # type: ignore[arg-type]
            if any(r.get("Code") == "TransactionConflict" for r in reasons):
                raise _TransactionConflict(
                    f"a concurrent transaction on {self._where} touched the same rows") from None
            return reasons

    def _ensure_table(self) -> str:
        try:
            desc = self._call("describe_table", "ResourceNotFoundException",
                              TableName=self._table)["Table"]
        except botocore.exceptions.ClientError:
            desc = self._create_table()
        if desc.get("TableStatus") != "ACTIVE":
            self._client.get_waiter("table_exists").wait(
                TableName=self._table, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
            desc = self._call("describe_table", TableName=self._table)["Table"]
        problems = []
        keys = {(k["AttributeName"], k["KeyType"]) for k in desc.get("KeySchema", [])}
        if keys != {(PK, "HASH"), (SK, "RANGE")}:
            problems.append(f"key schema must be {PK} (HASH) + {SK} (RANGE), found {sorted(keys)}")
        indexes = {i["IndexName"] for i in desc.get("GlobalSecondaryIndexes", [])}
        for name in (BY_SOURCE, BY_DESTINATION):
            if name not in indexes:
                problems.append(f"global secondary index {name!r} is missing")
        stream = desc.get("StreamSpecification") or {}
        if not stream.get("StreamEnabled") or stream.get("StreamViewType") not in (
                "NEW_AND_OLD_IMAGES", "NEW_IMAGE"):
            problems.append("DynamoDB Streams must be enabled with NEW_AND_OLD_IMAGES")
        if problems:
            raise MirrorsDatabaseConfigError(
                f"{self._where} exists but does not fit: " + "; ".join(problems))
        return str(desc["LatestStreamArn"])

    def _create_table(self) -> dict[str, Any]:
        def index(name: str) -> dict[str, Any]:
            return {"IndexName": name, "Projection": {"ProjectionType": "ALL"},
                    "KeySchema": [{"AttributeName": name, "KeyType": "HASH"},
                                  {"AttributeName": SK, "KeyType": "RANGE"}]}

        log.info("creating mirrors table", extra={"table": self._table})
        try:
            return self._call(
                "create_table", "ResourceInUseException",
                TableName=self._table,
                AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                                      for a in (PK, SK, BY_SOURCE, BY_DESTINATION)],
                KeySchema=[{"AttributeName": PK, "KeyType": "HASH"},
                           {"AttributeName": SK, "KeyType": "RANGE"}],
                GlobalSecondaryIndexes=[index(BY_SOURCE), index(BY_DESTINATION)],
                BillingMode="PAY_PER_REQUEST",
                StreamSpecification={"StreamEnabled": True,
                                     "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )["TableDescription"]
        except botocore.exceptions.ClientError:  # another replica created it first
            return {"TableStatus": "CREATING"}

    def _get(self, key: dict[str, Any], **kwargs: Any) -> dict[str, Any] | None:
        item = self._call("get_item", TableName=self._table, Key=key,
                          ConsistentRead=True, **kwargs).get("Item")
        return None if item is None else _deser(item)

    def _query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """All items of a query, following pages."""
        while True:
            page = self._call("query", TableName=self._table, **kwargs)
            yield from (_deser(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), 25):
            pending: dict[str, Any] = {self._table: requests[start:start + 25]}
            for attempt in range(10):
                if not pending:
                    break
                if attempt:
                    time.sleep(min(1.0, 0.05 * 2**attempt))  # backoff on unprocessed items
                pending = self._call("batch_write_item",
                                     RequestItems=pending).get("UnprocessedItems") or {}
            if pending:
                raise MirrorsDatabaseError(f"{self._where} kept throttling a batch write")

    # --- mirrors --------------------------------------------------------------------------
    def _insert_mirror(self, mirror: Mirror) -> None:
        absent = "attribute_not_exists(row_id)"
        reasons = self._transact([
            {"Put": {"TableName": self._table, "Item": _ser(_mirror_item(mirror)),
                     "ConditionExpression": absent}},
            {"Put": {"TableName": self._table, "ConditionExpression": absent,
                     "Item": {**_name_guard(mirror), "mirror_id": {"S": mirror.id}},
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
            {"Put": {"TableName": self._table, "ConditionExpression": absent,
                     "Item": {**_namespace_guard(mirror), "mirror_id": {"S": mirror.id}},
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        ])
        if reasons is None:
            return
        failed = [r.get("Code") == "ConditionalCheckFailed" for r in reasons] + [False] * 3

        def holder(i: int) -> str:
            return str(_deser(reasons[i].get("Item") or {}).get("mirror_id", "?"))

        if failed[0]:
            raise MirrorExistsError(f"mirror id {mirror.id!r} already exists")
        if failed[1]:
            raise MirrorExistsError(
                f"mirror {holder(1)!r} already mirrors into {mirror.name!r} in region "
                f"{mirror.destination_region!r}")
        if failed[2]:
            raise MirrorExistsError(
                f"storage namespace {mirror.storage_namespace!r} is used by mirror {holder(2)!r}")
        raise MirrorsDatabaseError(f"creating mirror {mirror.id!r} was cancelled: {reasons}")

    def _import_mirrors(self, mirrors: Sequence[Mirror]) -> None:
        keys: list[dict[str, Any]] = []
        for m in mirrors:
            keys.append(_ser({PK: m.organization_id, SK: _MIRROR + m.id}))
            if m.state.is_live:
                keys += [_name_guard(m), _namespace_guard(m)]
        for start in range(0, len(keys), 100):
            found = self._batch_get(keys[start:start + 100])
            if found:
                raise MirrorExistsError(
                    f"import clashes with stored rows (ids, live names or namespaces): "
                    f"{sorted(found)[:5]}")
        requests = []
        for m in mirrors:
            requests.append({"PutRequest": {"Item": _ser(_mirror_item(m))}})
            if m.state.is_live:
                for guard in (_name_guard(m), _namespace_guard(m)):
                    requests.append({"PutRequest": {"Item": {**guard,
                                                             "mirror_id": {"S": m.id}}}})
        self._batch_write(requests)

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[str]:
        found: list[str] = []
        pending: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True,
                                                 "ProjectionExpression": "row_id"}}
        for attempt in range(10):
            if not pending:
                return found
            if attempt:
                time.sleep(min(1.0, 0.05 * 2**attempt))  # backoff on unprocessed keys
            page = self._call("batch_get_item", RequestItems=pending)
            found += [str(_deser(i)[SK]) for i in page["Responses"].get(self._table, [])]
            pending = page.get("UnprocessedKeys") or {}
        raise MirrorsDatabaseError(f"{self._where} kept throttling a batch read")

    def get_mirror(self, organization_id: str, mirror_id: str) -> Mirror:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        item = self._get(_ser({PK: organization_id, SK: _MIRROR + mirror_id}),
                         **_MIRROR_PROJECTION)
        if item is None:
            raise MirrorNotFoundError(organization_id, mirror_id)
        return _mirror_from_item(item)

    def _list_mirrors(self, where: MirrorFilter, after_id: str | None, limit: int) -> list[Mirror]:
        org = where.organization_id
        start: dict[str, Any] = {PK: org, SK: _MIRROR + (after_id or "")}
        if where.source_region is not None:
            index, value = BY_SOURCE, f"{org}#{where.source_region}#{where.source_repository}"
        elif where.destination_region is not None:
            index, value = BY_DESTINATION, f"{org}#{where.destination_region}"
        else:
            index, value = "", ""
        names = _MIRROR_NAMES
        if index:
            query: dict[str, Any] = {
                "IndexName": index, "KeyConditionExpression": "#k = :k",
                "ProjectionExpression": _MIRROR_PROJECTION["ProjectionExpression"],
                "ExpressionAttributeNames": {**names, "#k": index},
                "ExpressionAttributeValues": _ser({":k": value})}
            start[index] = value
        else:
            query = {"KeyConditionExpression": "#k = :k AND begins_with(#s, :p)",
                     "ProjectionExpression": _MIRROR_PROJECTION["ProjectionExpression"],
                     "ExpressionAttributeNames": {**names, "#k": PK, "#s": SK},
                     "ExpressionAttributeValues": _ser({":k": org, ":p": _MIRROR}),
                     "ConsistentRead": True}
        if after_id is not None:
            query["ExclusiveStartKey"] = _ser(start)
        found: list[Mirror] = []
        while len(found) < limit:
            page = self._call("query", TableName=self._table, Limit=limit - len(found), **query)
            found += [_mirror_from_item(_deser(i)) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def _update_mirror(
        self, new: Mirror, expected_version: int, from_states: frozenset[MirrorState]
    ) -> Mirror:
        if new.state is MirrorState.DELETED:
            return self._mark_deleted(new, expected_version, from_states)
        states = sorted(s.value for s in from_states)
        values = {":v": expected_version, ":nv": new.version, ":s": new.state.value,
                  ":u": to_micros(new.updated_at),
                  **{f":f{i}": s for i, s in enumerate(states)}}
        in_list = ", ".join(f":f{i}" for i in range(len(states)))
        update = "SET #state = :s, #updated = :u, #version = :nv"
        if new.error:
            update += ", #error = :e"
            values[":e"] = new.error
        else:
            update += " REMOVE #error"
        try:
            out = self._call(
                "update_item", _CONDITION_FAILED, TableName=self._table,
                Key=_ser({PK: new.organization_id, SK: _MIRROR + new.id}),
                UpdateExpression=update,
                ConditionExpression=f"#version = :v AND #state IN ({in_list})",
                ExpressionAttributeNames={"#state": "state", "#updated": "updated_at",
                                          "#version": "version", "#error": "error"},
                ExpressionAttributeValues=_ser(values),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except botocore.exceptions.ClientError as exc:
            self._explain_mirror_failure(new, expected_version, _old_item(exc))
        return _mirror_from_item(_deser(out["Attributes"]))

    def _explain_mirror_failure(
        self, new: Mirror, expected_version: int, old: dict[str, Any] | None
    ) -> NoReturn:
        if not old:
            raise MirrorNotFoundError(new.organization_id, new.id)
        current = _mirror_from_item(_deser(old))
        if current.version != expected_version:
            raise VersionConflictError(
                f"mirror {new.id!r} is at version {current.version}, not {expected_version}")
        raise InvalidStateTransitionError(current.state.value, new.state.value, new.id)

    def _guard_deletes(self, m: Mirror) -> list[dict[str, Any]]:
        """Remove a live mirror's guards, unless they (somehow) belong to another."""
        ours_or_gone = "attribute_not_exists(row_id) OR mirror_id = :id"
        return [{"Delete": {"TableName": self._table, "Key": key,
                            "ConditionExpression": ours_or_gone,
                            "ExpressionAttributeValues": {":id": {"S": m.id}}}}
                for key in (_name_guard(m), _namespace_guard(m))]

    def _mark_deleted(
        self, new: Mirror, expected_version: int, from_states: frozenset[MirrorState]
    ) -> Mirror:
        # The guards' keys come from the stored row, never from the caller's copy.
        current = self.get_mirror(new.organization_id, new.id)
        if current.version != expected_version:
            raise VersionConflictError(
                f"mirror {new.id!r} is at version {current.version}, not {expected_version}")
        if current.state not in from_states:
            raise InvalidStateTransitionError(current.state.value, new.state.value, new.id)
        stored = replace(current, state=MirrorState.DELETED, error=new.error,
                         updated_at=new.updated_at, version=new.version)
        reasons = self._transact([
            {"Put": {"TableName": self._table, "Item": _ser(_mirror_item(stored)),
                     "ConditionExpression": "#version = :v",
                     "ExpressionAttributeNames": {"#version": "version"},
                     "ExpressionAttributeValues": _ser({":v": expected_version}),
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
            *self._guard_deletes(current),
        ])
        if reasons is not None:
            self._explain_mirror_failure(new, expected_version, reasons[0].get("Item"))
        return stored

    def delete_mirror(
        self, organization_id: str, mirror_id: str, expected_version: int | None = None
    ) -> None:
        current = self.get_mirror(organization_id, mirror_id)
        if expected_version is not None and current.version != expected_version:
            raise VersionConflictError(
                f"mirror {mirror_id!r} is at version {current.version}, not {expected_version}")
        reasons = self._transact([
            {"Delete": {"TableName": self._table,
                        "Key": _ser({PK: organization_id, SK: _MIRROR + mirror_id}),
                        "ConditionExpression": "#version = :v",
                        "ExpressionAttributeNames": {"#version": "version"},
                        "ExpressionAttributeValues": _ser({":v": current.version})}},
            *(self._guard_deletes(current) if current.state.is_live else []),
        ])
        if reasons is not None:
            raise VersionConflictError(f"mirror {mirror_id!r} changed while being deleted")
        # Branch rows go after the mirror: an interrupted delete leaves orphans that no
        # reader can reach (progress is only read through a mirror), never a half mirror.
        self._batch_write([
            {"DeleteRequest": {"Key": _branch_key(organization_id, mirror_id, p.branch)}}
            for p in self.list_branch_progress(organization_id, mirror_id)
        ])

    # --- branch progress -------------------------------------------------------------------
    def get_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str
    ) -> MirrorBranch:
        check_branch_key(organization_id, mirror_id, branch)
        item = self._get(_branch_key(organization_id, mirror_id, branch))
        if item is None:
            raise BranchProgressNotFoundError(organization_id, mirror_id, branch)
        return branch_from_dict(item, f"{organization_id}/{item[SK]}")

    def list_branch_progress(self, organization_id: str, mirror_id: str) -> list[MirrorBranch]:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        items = self._query(
            KeyConditionExpression="#k = :k AND begins_with(#s, :p)",
            ExpressionAttributeNames={"#k": PK, "#s": SK},
            ExpressionAttributeValues=_ser({":k": organization_id,
                                            ":p": f"{_BRANCH}{mirror_id}#"}),
            ConsistentRead=True)
        rows = [branch_from_dict(i, f"{organization_id}/{i[SK]}") for i in items]
        return sorted(rows, key=lambda p: p.branch)

    def _insert_branch(self, progress: MirrorBranch) -> None:
        reasons = self._transact([
            {"ConditionCheck": {
                "TableName": self._table,
                "Key": _ser({PK: progress.organization_id, SK: _MIRROR + progress.mirror_id}),
                "ConditionExpression": "attribute_exists(row_id) AND #state <> :deleted",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":deleted": {"S": MirrorState.DELETED.value}}}},
            {"Put": {"TableName": self._table, "Item": _ser(_branch_item(progress)),
                     "ConditionExpression": "attribute_not_exists(row_id)"}},
        ])
        if reasons is None:
            return
        if reasons[0].get("Code") == "ConditionalCheckFailed":
            raise MirrorNotFoundError(progress.organization_id, progress.mirror_id,
                                      "no live mirror to record branch progress for")
        raise VersionConflictError(
            f"progress of branch {progress.branch!r} of mirror {progress.mirror_id!r} "
            "already exists")

    def _update_branch(self, progress: MirrorBranch, expected_version: int) -> None:
        self._conditional_branch_write(
            "put_item", progress.organization_id, progress.mirror_id, progress.branch,
            expected_version, Item=_ser(_branch_item(progress)))

    def delete_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str, expected_version: int
    ) -> None:
        check_branch_key(organization_id, mirror_id, branch)
        self._conditional_branch_write(
            "delete_item", organization_id, mirror_id, branch, expected_version,
            Key=_branch_key(organization_id, mirror_id, branch))

    def _conditional_branch_write(
        self, operation: str, org: str, mirror_id: str, branch: str, expected_version: int,
        **kwargs: Any,
    ) -> None:
        try:
            self._call(operation, _CONDITION_FAILED, TableName=self._table,
                       ConditionExpression="#version = :v",
                       ExpressionAttributeNames={"#version": "version"},
                       ExpressionAttributeValues=_ser({":v": expected_version}),
                       ReturnValuesOnConditionCheckFailure="ALL_OLD", **kwargs)
        except botocore.exceptions.ClientError as exc:
            old = _old_item(exc)
            if not old:
                raise BranchProgressNotFoundError(org, mirror_id, branch) from None
            version = _deser(old).get("version")
            raise VersionConflictError(
                f"progress of branch {branch!r} of mirror {mirror_id!r} is at version "
                f"{version}, not {expected_version}") from None

    # --- leases -----------------------------------------------------------------------------
    def _acquire_lease(
        self, organization_id: str, name: str, owner: str, now: datetime, expires_at: datetime
    ) -> Lease:
        try:
            out = self._call(
                "update_item", _CONDITION_FAILED, TableName=self._table,
                Key=_ser({PK: organization_id, SK: _LEASE + name}),
                UpdateExpression=("SET #name = :n, #owner = :o, #exp = :e, "
                                  "#version = if_not_exists(#version, :zero) + :one"),
                ConditionExpression="attribute_not_exists(row_id) OR #exp <= :now OR #owner = :o",
                ExpressionAttributeNames={"#name": "name", "#owner": "owner",
                                          "#exp": "expires_at", "#version": "version"},
                ExpressionAttributeValues=_ser({
                    ":n": name, ":o": owner, ":e": to_micros(expires_at), ":zero": 0, ":one": 1,
                    ":now": to_micros(now)}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except botocore.exceptions.ClientError as exc:
            held = lease_from_dict(_deser(_old_item(exc) or {}),
                                   f"{organization_id}/{_LEASE}{name}")
            raise LeaseHeldError(name, held.owner, held.expires_at) from None
        return lease_from_dict(_deser(out["Attributes"]), f"{organization_id}/{_LEASE}{name}")

    def _renew_lease(self, lease: Lease, expires_at: datetime) -> Lease:
        try:
            out = self._call(
                "update_item", _CONDITION_FAILED, TableName=self._table,
                Key=_ser({PK: lease.organization_id, SK: _LEASE + lease.name}),
                UpdateExpression="SET #exp = :e, #version = #version + :one",
                ConditionExpression="#owner = :o AND #version = :v",
                ExpressionAttributeNames={"#owner": "owner", "#exp": "expires_at",
                                          "#version": "version"},
                ExpressionAttributeValues=_ser({":e": to_micros(expires_at), ":one": 1,
                                                ":o": lease.owner, ":v": lease.version}),
                ReturnValues="ALL_NEW",
            )
        except botocore.exceptions.ClientError:
            raise LeaseLostError(
                f"lease {lease.name!r} is no longer held by {lease.owner!r}") from None
        return lease_from_dict(_deser(out["Attributes"]),
                               f"{lease.organization_id}/{_LEASE}{lease.name}")

    def release_lease(self, lease: Lease) -> bool:
        try:
            self._call(
                "delete_item", _CONDITION_FAILED, TableName=self._table,
                Key=_ser({PK: lease.organization_id, SK: _LEASE + lease.name}),
                ConditionExpression="#owner = :o AND #version = :v",
                ExpressionAttributeNames={"#owner": "owner", "#version": "version"},
                ExpressionAttributeValues=_ser({":o": lease.owner, ":v": lease.version}))
        except botocore.exceptions.ClientError:
            return False
        return True

    def get_lease(self, organization_id: str, name: str) -> Lease | None:
        check_key_part(organization_id, "organization_id")
        check_text(name, "lease name", 256)
        item = self._get(_ser({PK: organization_id, SK: _LEASE + name}))
        return None if item is None else lease_from_dict(item, f"{organization_id}/{item[SK]}")

    # --- change feed ----------------------------------------------------------------------------
    def watch(
        self,
        organization_id: str | None = None,
        kinds: frozenset[RowKind] = ALL_KINDS,
        poll_interval: float | None = None,
    ) -> ChangeFeed:
        return _StreamFeed(self._streams, self._stream_arn, organization_id, kinds,
                           poll_interval or 0.25)

    def close(self) -> None:
        self._client.close()
        self._streams.close()


_SESSIONS: dict[str | None, boto3.session.Session] = {}
_SESSION_LOCK = threading.Lock()


def _session(profile: str | None) -> boto3.session.Session:
    """One boto3 session per profile and process, so service models load only once."""
    with _SESSION_LOCK:
        if profile not in _SESSIONS:
            _SESSIONS[profile] = boto3.session.Session(profile_name=profile)
        return _SESSIONS[profile]


def _secret(value: Any) -> str | None:
    return None if value is None else str(value.get_secret_value())


@dataclass
class _Shard:
    """Read position in one stream shard."""

    shard_id: str
    iterator: str | None
    last_seq: int | None = None


class _StreamFeed(ChangeFeed):
    """Follows a DynamoDB stream: LATEST on the shards open at start, TRIM_HORIZON
    on shards that appear later (their parents are read to the end first).

    Iterators are re-acquired every few seconds from the last sequence number seen,
    which keeps them from expiring (15 minutes on AWS) and re-attaches them to the
    live shard on servers that swap a table's shard out (moto, after a cancelled
    transaction).
    """

    REFRESH_SECONDS = 2.0
    DISCOVER_SECONDS = 10.0

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        organization_id: str | None,
        kinds: frozenset[RowKind],
        interval: float,
    ) -> None:
        super().__init__(organization_id, kinds)
        self._streams = streams
        self._arn = stream_arn
        self._interval = interval
        self._shards: dict[str, _Shard] = {}
        self._done: set[str] = set()
        try:
            self._discover(initial=True)
        except _UNREACHABLE as exc:
            raise MirrorsDatabaseUnavailableError(
                f"cannot read stream {stream_arn}: {exc}") from None
        now = time.monotonic()
        self._next_refresh = now + self.REFRESH_SECONDS
        self._next_discover = now + self.DISCOVER_SECONDS
        self._start("mirrors-db-stream-feed")

    def _iterator(self, shard_id: str, kind: str, seq: int | None = None) -> str:
        args: dict[str, Any] = {"StreamArn": self._arn, "ShardId": shard_id,
                                "ShardIteratorType": kind}
        if seq is not None:
            args["SequenceNumber"] = str(seq)
        return str(self._streams.get_shard_iterator(**args)["ShardIterator"])

    def _discover(self, initial: bool) -> None:
        args: dict[str, Any] = {"StreamArn": self._arn}
        shards: list[dict[str, Any]] = []
        while True:
            desc = self._streams.describe_stream(**args)["StreamDescription"]
            shards += desc.get("Shards", [])
            last = desc.get("LastEvaluatedShardId")
            if not last:
                break
            args["ExclusiveStartShardId"] = last
        for shard in shards:
            sid = shard["ShardId"]
            if sid in self._shards or sid in self._done:
                continue
            closed = "EndingSequenceNumber" in shard.get("SequenceNumberRange", {})
            if initial:
                if closed:
                    self._done.add(sid)  # history from before the watch started
                else:
                    self._shards[sid] = _Shard(sid, self._iterator(sid, "LATEST"))
                continue
            if shard.get("ParentShardId") not in self._shards:  # children wait for parents
                self._shards[sid] = _Shard(sid, self._iterator(sid, "TRIM_HORIZON"))

    def _read(self, shard: _Shard) -> None:
        if shard.iterator is None:
            return
        try:
            page = self._streams.get_records(ShardIterator=shard.iterator, Limit=1000)
        except botocore.exceptions.ClientError as exc:
            if _code(exc) == "ExpiredIteratorException":
                self._refresh(shard)
                return
            if _code(exc) == "TrimmedDataAccessException":
                shard.iterator, shard.last_seq = self._iterator(shard.shard_id, "LATEST"), None
                return
            raise
        for record in page.get("Records", []):
            seq = int(record["dynamodb"]["SequenceNumber"])
            if shard.last_seq is not None and seq <= shard.last_seq:
                continue  # delivered before an iterator refresh
            shard.last_seq = seq
            try:
                event = _event_from_record(record)
            except MalformedRowError as exc:
                log.warning("skipping malformed stream record: %s", exc)
                continue
            if event is not None:
                self._emit(event)
        shard.iterator = page.get("NextShardIterator")
        if shard.iterator is None:  # the shard is closed and fully read
            del self._shards[shard.shard_id]
            self._done.add(shard.shard_id)
            self._next_discover = 0.0

    def _refresh(self, shard: _Shard) -> None:
        if shard.last_seq is not None:
            shard.iterator = self._iterator(shard.shard_id, "AFTER_SEQUENCE_NUMBER",
                                            shard.last_seq)
            return
        # Nothing seen yet: take a new LATEST, drain the old iterator up to it, and
        # rely on the sequence check in _read to drop what both return.
        fresh = self._iterator(shard.shard_id, "LATEST")
        self._read(shard)
        if shard.shard_id in self._shards:
            shard.iterator = fresh

    def _poll(self) -> None:
        if self._stop.wait(self._interval):
            return
        for shard in list(self._shards.values()):
            self._read(shard)
        now = time.monotonic()
        if now >= self._next_discover:
            self._discover(initial=False)
            self._next_discover = now + self.DISCOVER_SECONDS
        if now >= self._next_refresh:
            for shard in list(self._shards.values()):
                self._refresh(shard)
            self._next_refresh = now + self.REFRESH_SECONDS

    def _recover(self) -> None:
        for shard in list(self._shards.values()):
            self._refresh(shard)

