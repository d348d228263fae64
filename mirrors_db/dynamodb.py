"""Mirrors table on DynamoDB (a global table when regions share it), via boto3.

One table, partition key ``organization_id``, sort key ``row_id``:

* ``mirror#<id>``: a mirror. Its written-once fields live in one JSON attribute
  ``spec``; ``state``, ``error``, ``updated_at`` and ``version`` are attributes of
  their own, so updates touch only what changes. ``by_source`` and
  ``by_destination`` feed two sparse global secondary indexes of the same names.
* ``branch#<mirror_id>#<branch>``: branch progress.
* ``lease#<name>``: a lease.
* ``reading#<destination_region>#<source_region>#<page>``: a page of a sensor's
  reading (:class:`~mirrors_db.models.SensorReading`); replaced only by a later one.
* ``name#<destination_region>#<name>`` and ``namespace#<storage_namespace>``:
  uniqueness guards of live mirrors, written and removed in the same
  TransactWriteItems as the mirror itself.

Every write carries a ConditionExpression on ``version`` (a reading's, on its time).
Transactions are atomic within one region; on a global table, two regions can both win
concurrent writes to one item (last writer wins), which is why each row kind has
a single writing region (see ``mirrors_db.models``).

The change feed reads the table's stream (NEW_AND_OLD_IMAGES), one iterator per
open shard, starting at LATEST (:mod:`mirrors_db.dynamodb_streams`). The items'
keys and codecs are in :mod:`mirrors_db.dynamodb_items`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NoReturn

import boto3
import botocore.exceptions
from botocore.config import Config
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from mirrors_db.codec import (
    branch_from_dict,
    cut_from_dict,
    group_from_dict,
    group_progress_from_dict,
    lease_from_dict,
    to_micros,
)
from mirrors_db.config import DynamoDBMirrorsConfig
from mirrors_db.dynamodb_items import (
    BRANCH_PREFIX,
    BY_DESTINATION,
    BY_SOURCE,
    CONDITION_FAILED,
    CUT_PREFIX,
    GROUP_PREFIX,
    LEASE_PREFIX,
    MIRROR_NAMES,
    MIRROR_PREFIX,
    MIRROR_PROJECTION,
    PK,
    READING_PREFIX,
    SK,
    UNREACHABLE,
    TransactionConflict,
    branch_item,
    branch_key,
    cut_item,
    cut_sort_key,
    deserialize,
    error_code,
    group_item,
    group_key,
    group_name_guard,
    group_progress_item,
    group_progress_key,
    mirror_from_item,
    mirror_item,
    name_guard,
    namespace_guard,
    old_item,
    reading_from_item,
    reading_item,
    serialize,
)
from mirrors_db.dynamodb_streams import (
    StreamFeed,
)
from mirrors_db.errors import (
    BranchProgressNotFoundError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidStateTransitionError,
    LeaseHeldError,
    LeaseLostError,
    MirrorExistsError,
    MirrorNotFoundError,
    MirrorsDatabaseConfigError,
    MirrorsDatabaseError,
    MirrorsDatabaseUnavailableError,
    VersionConflictError,
)
from mirrors_db.models import (
    CUTS_KEPT,
    Clock,
    GroupCut,
    GroupProgress,
    Lease,
    Mirror,
    MirrorBranch,
    MirrorGroup,
    MirrorState,
    RowKind,
    SensorReading,
    check_branch_key,
    check_key_part,
    check_text,
)
from mirrors_db.table import ALL_KINDS, ChangeFeed, MirrorFilter, MirrorsTable

log = logging.getLogger(__name__)


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
        except UNREACHABLE as exc:
            raise MirrorsDatabaseUnavailableError(f"cannot reach {self._where}: {exc}") from None
        except botocore.exceptions.NoCredentialsError:
            raise MirrorsDatabaseConfigError(
                f"no AWS credentials for {self._where}; set mirrors_database.dynamodb "
                "credentials or the AWS environment"
            ) from None
        except botocore.exceptions.ClientError as exc:
            if expect and error_code(exc) == expect:
                raise
            if error_code(exc) in ("UnrecognizedClientException", "AccessDeniedException",
                              "InvalidSignatureException"):
                raise MirrorsDatabaseConfigError(
                    f"{self._where} refused the credentials: {exc}") from None
            raise MirrorsDatabaseError(f"{self._where}: {operation} failed: {exc}") from None

    @retry(retry=retry_if_exception_type(TransactionConflict), stop=stop_after_attempt(5),
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
                raise TransactionConflict(
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
        return None if item is None else deserialize(item)

    def _query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """All items of a query, following pages."""
        while True:
            page = self._call("query", TableName=self._table, **kwargs)
            yield from (deserialize(i) for i in page.get("Items", []))
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
            {"Put": {"TableName": self._table, "Item": serialize(mirror_item(mirror)),
                     "ConditionExpression": absent}},
            {"Put": {"TableName": self._table, "ConditionExpression": absent,
                     "Item": {**name_guard(mirror), "mirror_id": {"S": mirror.id}},
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
            {"Put": {"TableName": self._table, "ConditionExpression": absent,
                     "Item": {**namespace_guard(mirror), "mirror_id": {"S": mirror.id}},
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        ])
        if reasons is None:
            return
        failed = [r.get("Code") == "ConditionalCheckFailed" for r in reasons] + [False] * 3

        def holder(i: int) -> str:
            return str(deserialize(reasons[i].get("Item") or {}).get("mirror_id", "?"))

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
            keys.append(serialize({PK: m.organization_id, SK: MIRROR_PREFIX + m.id}))
            if m.state.is_live:
                keys += [name_guard(m), namespace_guard(m)]
        for start in range(0, len(keys), 100):
            found = self._batch_get(keys[start:start + 100])
            if found:
                raise MirrorExistsError(
                    f"import clashes with stored rows (ids, live names or namespaces): "
                    f"{sorted(found)[:5]}")
        requests = []
        for m in mirrors:
            requests.append({"PutRequest": {"Item": serialize(mirror_item(m))}})
            if m.state.is_live:
                for guard in (name_guard(m), namespace_guard(m)):
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
            found += [str(deserialize(i)[SK]) for i in page["Responses"].get(self._table, [])]
            pending = page.get("UnprocessedKeys") or {}
        raise MirrorsDatabaseError(f"{self._where} kept throttling a batch read")

    def get_mirror(self, organization_id: str, mirror_id: str) -> Mirror:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        item = self._get(serialize({PK: organization_id, SK: MIRROR_PREFIX + mirror_id}),
                         **MIRROR_PROJECTION)
        if item is None:
            raise MirrorNotFoundError(organization_id, mirror_id)
        return mirror_from_item(item)

    def _list_mirrors(self, where: MirrorFilter, after_id: str | None, limit: int) -> list[Mirror]:
        org = where.organization_id
        start: dict[str, Any] = {PK: org, SK: MIRROR_PREFIX + (after_id or "")}
        if where.source_region is not None:
            index, value = BY_SOURCE, f"{org}#{where.source_region}#{where.source_repository}"
        elif where.destination_region is not None:
            index, value = BY_DESTINATION, f"{org}#{where.destination_region}"
        else:
            index, value = "", ""
        names = MIRROR_NAMES
        if index:
            query: dict[str, Any] = {
                "IndexName": index, "KeyConditionExpression": "#k = :k",
                "ProjectionExpression": MIRROR_PROJECTION["ProjectionExpression"],
                "ExpressionAttributeNames": {**names, "#k": index},
                "ExpressionAttributeValues": serialize({":k": value})}
            start[index] = value
        else:
            query = {"KeyConditionExpression": "#k = :k AND begins_with(#s, :p)",
                     "ProjectionExpression": MIRROR_PROJECTION["ProjectionExpression"],
                     "ExpressionAttributeNames": {**names, "#k": PK, "#s": SK},
                     "ExpressionAttributeValues": serialize({":k": org, ":p": MIRROR_PREFIX}),
                     "ConsistentRead": True}
        if after_id is not None:
            query["ExclusiveStartKey"] = serialize(start)
        found: list[Mirror] = []
        while len(found) < limit:
            page = self._call("query", TableName=self._table, Limit=limit - len(found), **query)
            found += [mirror_from_item(deserialize(i)) for i in page.get("Items", [])]
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
                "update_item", CONDITION_FAILED, TableName=self._table,
                Key=serialize({PK: new.organization_id, SK: MIRROR_PREFIX + new.id}),
                UpdateExpression=update,
                ConditionExpression=f"#version = :v AND #state IN ({in_list})",
                ExpressionAttributeNames={"#state": "state", "#updated": "updated_at",
                                          "#version": "version", "#error": "error"},
                ExpressionAttributeValues=serialize(values),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except botocore.exceptions.ClientError as exc:
            self._explain_mirror_failure(new, expected_version, old_item(exc))
        return mirror_from_item(deserialize(out["Attributes"]))

    def _explain_mirror_failure(
        self, new: Mirror, expected_version: int, old: dict[str, Any] | None
    ) -> NoReturn:
        if not old:
            raise MirrorNotFoundError(new.organization_id, new.id)
        current = mirror_from_item(deserialize(old))
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
                for key in (name_guard(m), namespace_guard(m))]

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
            {"Put": {"TableName": self._table, "Item": serialize(mirror_item(stored)),
                     "ConditionExpression": "#version = :v",
                     "ExpressionAttributeNames": {"#version": "version"},
                     "ExpressionAttributeValues": serialize({":v": expected_version}),
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
                        "Key": serialize({PK: organization_id, SK: MIRROR_PREFIX + mirror_id}),
                        "ConditionExpression": "#version = :v",
                        "ExpressionAttributeNames": {"#version": "version"},
                        "ExpressionAttributeValues": serialize({":v": current.version})}},
            *(self._guard_deletes(current) if current.state.is_live else []),
        ])
        if reasons is not None:
            raise VersionConflictError(f"mirror {mirror_id!r} changed while being deleted")
        # Branch rows go after the mirror: an interrupted delete leaves orphans that no
        # reader can reach (progress is only read through a mirror), never a half mirror.
        self._batch_write([
            {"DeleteRequest": {"Key": branch_key(organization_id, mirror_id, p.branch)}}
            for p in self.list_branch_progress(organization_id, mirror_id)
        ])

    # --- branch progress -------------------------------------------------------------------
    def get_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str
    ) -> MirrorBranch:
        check_branch_key(organization_id, mirror_id, branch)
        item = self._get(branch_key(organization_id, mirror_id, branch))
        if item is None:
            raise BranchProgressNotFoundError(organization_id, mirror_id, branch)
        return branch_from_dict(item, f"{organization_id}/{item[SK]}")

    def list_branch_progress(self, organization_id: str, mirror_id: str) -> list[MirrorBranch]:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        items = self._query(
            KeyConditionExpression="#k = :k AND begins_with(#s, :p)",
            ExpressionAttributeNames={"#k": PK, "#s": SK},
            ExpressionAttributeValues=serialize({":k": organization_id,
                                            ":p": f"{BRANCH_PREFIX}{mirror_id}#"}),
            ConsistentRead=True)
        rows = [branch_from_dict(i, f"{organization_id}/{i[SK]}") for i in items]
        return sorted(rows, key=lambda p: p.branch)

    def _list_all_branches(self, organization_id: str, after: tuple[str, str] | None,
                           limit: int) -> list[MirrorBranch]:
        query: dict[str, Any] = {
            "KeyConditionExpression": "#k = :k AND begins_with(#s, :p)",
            "ExpressionAttributeNames": {"#k": PK, "#s": SK},
            "ExpressionAttributeValues": serialize({":k": organization_id, ":p": BRANCH_PREFIX}),
            "ConsistentRead": True}
        if after is not None:
            query["ExclusiveStartKey"] = serialize(
                {PK: organization_id, SK: f"{BRANCH_PREFIX}{after[0]}#{after[1]}"})
        found: list[MirrorBranch] = []
        while len(found) < limit:
            page = self._call("query", TableName=self._table, Limit=limit - len(found), **query)
            found += [branch_from_dict(i, f"{organization_id}/{i[SK]}")
                      for i in map(deserialize, page.get("Items", []))]
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def _insert_branch(self, progress: MirrorBranch) -> None:
        reasons = self._transact([
            {"ConditionCheck": {
                "TableName": self._table,
                "Key": serialize({PK: progress.organization_id,
                                  SK: MIRROR_PREFIX + progress.mirror_id}),
                "ConditionExpression": "attribute_exists(row_id) AND #state <> :deleted",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":deleted": {"S": MirrorState.DELETED.value}}}},
            {"Put": {"TableName": self._table, "Item": serialize(branch_item(progress)),
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
            expected_version, Item=serialize(branch_item(progress)))

    def delete_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str, expected_version: int
    ) -> None:
        check_branch_key(organization_id, mirror_id, branch)
        self._conditional_branch_write(
            "delete_item", organization_id, mirror_id, branch, expected_version,
            Key=branch_key(organization_id, mirror_id, branch))

    def _conditional_branch_write(
        self, operation: str, org: str, mirror_id: str, branch: str, expected_version: int,
        **kwargs: Any,
    ) -> None:
        try:
            self._call(operation, CONDITION_FAILED, TableName=self._table,
                       ConditionExpression="#version = :v",
                       ExpressionAttributeNames={"#version": "version"},
                       ExpressionAttributeValues=serialize({":v": expected_version}),
                       ReturnValuesOnConditionCheckFailure="ALL_OLD", **kwargs)
        except botocore.exceptions.ClientError as exc:
            old = old_item(exc)
            if not old:
                raise BranchProgressNotFoundError(org, mirror_id, branch) from None
            version = deserialize(old).get("version")
            raise VersionConflictError(
                f"progress of branch {branch!r} of mirror {mirror_id!r} is at version "
                f"{version}, not {expected_version}") from None

    # --- mirror groups ---------------------------------------------------------------------
    def _version_check(self, expected_version: int) -> dict[str, Any]:
        return {"ConditionExpression": "#version = :v",
                "ExpressionAttributeNames": {"#version": "version"},
                "ExpressionAttributeValues": serialize({":v": expected_version})}

    def _insert_group(self, group: MirrorGroup) -> None:
        absent = "attribute_not_exists(row_id)"
        reasons = self._transact([
            {"Put": {"TableName": self._table, "Item": serialize(group_item(group)),
                     "ConditionExpression": absent}},
            {"Put": {"TableName": self._table, "ConditionExpression": absent,
                     "Item": {**group_name_guard(group), "group_id": {"S": group.id}}}},
        ])
        if reasons is not None:
            raise GroupExistsError(f"a group with id {group.id!r} or name {group.name!r} "
                                   "exists already")

    def get_group(self, organization_id: str, group_id: str) -> MirrorGroup:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        item = self._get(group_key(organization_id, group_id))
        if item is None:
            raise GroupNotFoundError(organization_id, group_id)
        return group_from_dict(item, f"{organization_id}/{item[SK]}")

    def list_groups(self, organization_id: str) -> list[MirrorGroup]:
        check_key_part(organization_id, "organization_id")
        items = self._query(
            KeyConditionExpression="#k = :k AND begins_with(#s, :p)",
            ExpressionAttributeNames={"#k": PK, "#s": SK},
            ExpressionAttributeValues=serialize({":k": organization_id, ":p": GROUP_PREFIX}),
            ConsistentRead=True)
        return [group_from_dict(i, f"{organization_id}/{i[SK]}") for i in items]

    def _group_conflict(self, org: str, group_id: str, expected_version: int) -> NoReturn:
        current = self.get_group(org, group_id)  # raises if missing
        raise VersionConflictError(
            f"group {group_id!r} is at version {current.version}, not {expected_version}")

    def _update_group(self, new: MirrorGroup, expected_version: int) -> MirrorGroup:
        try:
            self._call("put_item", CONDITION_FAILED, TableName=self._table,
                       Item=serialize(group_item(new)), **self._version_check(expected_version))
        except botocore.exceptions.ClientError:
            self._group_conflict(new.organization_id, new.id, expected_version)
        return new

    def delete_group(self, organization_id: str, group_id: str,
                     expected_version: int | None = None) -> None:
        current = self.get_group(organization_id, group_id)
        if expected_version is not None and current.version != expected_version:
            self._group_conflict(organization_id, group_id, expected_version)
        reasons = self._transact([
            {"Delete": {"TableName": self._table, "Key": group_key(organization_id, group_id),
                        **self._version_check(current.version)}},
            {"Delete": {"TableName": self._table, "Key": group_name_guard(current)}},
        ])
        if reasons is not None:
            raise VersionConflictError(f"group {group_id!r} changed while being deleted")
        # cuts go after the group: orphans no reader reaches (cuts are read through it)
        self._batch_write([{"DeleteRequest": {"Key": serialize({PK: organization_id,
                                                                SK: cut_sort_key(group_id,
                                                                                 c.sequence)})}}
                           for c in self.list_cuts(organization_id, group_id)])

    def _insert_cut(self, group: MirrorGroup, expected_version: int, cut: GroupCut) -> None:
        ops: list[dict[str, Any]] = [
            {"Put": {"TableName": self._table, "Item": serialize(group_item(group)),
                     **self._version_check(expected_version)}},
            {"Put": {"TableName": self._table, "Item": serialize(cut_item(cut)),
                     "ConditionExpression": "attribute_not_exists(row_id)"}},
        ]
        if cut.sequence > CUTS_KEPT:
            ops.append({"Delete": {"TableName": self._table, "Key": serialize({
                PK: cut.organization_id,
                SK: cut_sort_key(cut.group_id, cut.sequence - CUTS_KEPT)})}})
        if self._transact(ops) is not None:
            self._group_conflict(group.organization_id, group.id, expected_version)

    def list_cuts(self, organization_id: str, group_id: str, after: int = 0) -> list[GroupCut]:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        items = self._query(
            KeyConditionExpression="#k = :k AND #s BETWEEN :lo AND :hi",
            ExpressionAttributeNames={"#k": PK, "#s": SK},
            ExpressionAttributeValues=serialize({
                ":k": organization_id, ":lo": cut_sort_key(group_id, after + 1),
                ":hi": f"{CUT_PREFIX}{group_id}#~"}),
            ConsistentRead=True)
        return [cut_from_dict(i, f"{organization_id}/{i[SK]}") for i in items]

    def get_group_progress(self, organization_id: str, group_id: str) -> GroupProgress | None:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        item = self._get(group_progress_key(organization_id, group_id))
        return None if item is None else group_progress_from_dict(
            item, f"{organization_id}/{item[SK]}")

    def _put_group_progress(self, progress: GroupProgress, expected_version: int) -> None:
        item = serialize(group_progress_item(progress))
        org, group_id = progress.organization_id, progress.group_id
        if expected_version == 0:
            reasons = self._transact([
                {"ConditionCheck": {"TableName": self._table, "Key": group_key(org, group_id),
                                    "ConditionExpression": "attribute_exists(row_id)"}},
                {"Put": {"TableName": self._table, "Item": item,
                         "ConditionExpression": "attribute_not_exists(row_id)"}},
            ])
            if reasons is None:
                return
            if reasons[0].get("Code") == "ConditionalCheckFailed":
                raise GroupNotFoundError(org, group_id)
        else:
            try:
                self._call("put_item", CONDITION_FAILED, TableName=self._table, Item=item,
                           **self._version_check(expected_version))
                return
            except botocore.exceptions.ClientError:
                pass
        raise VersionConflictError(
            f"progress of group {group_id!r} is not at version {expected_version}")

    def delete_group_progress(self, organization_id: str, group_id: str,
                              expected_version: int) -> None:
        try:
            self._call("delete_item", CONDITION_FAILED, TableName=self._table,
                       Key=group_progress_key(organization_id, group_id),
                       **self._version_check(expected_version))
        except botocore.exceptions.ClientError:
            raise VersionConflictError(f"progress of group {group_id!r} is not at version "
                                       f"{expected_version}") from None

    # --- sensor readings --------------------------------------------------------------------
    def _put_sensor_reading(self, reading: SensorReading) -> bool:
        try:
            self._call("put_item", CONDITION_FAILED, TableName=self._table,
                       Item=serialize(reading_item(reading)),
                       ConditionExpression="attribute_not_exists(row_id) OR read_at < :r",
                       ExpressionAttributeValues=serialize({":r": to_micros(reading.read_at)}))
        except botocore.exceptions.ClientError:
            return False  # a newer reading is stored
        return True

    def list_sensor_readings(self, organization_id: str,
                             destination_region: str | None = None) -> list[SensorReading]:
        check_key_part(organization_id, "organization_id")
        prefix = READING_PREFIX + (f"{destination_region}#" if destination_region else "")
        items = self._query(
            KeyConditionExpression="#k = :k AND begins_with(#s, :p)",
            ExpressionAttributeNames={"#k": PK, "#s": SK},
            ExpressionAttributeValues=serialize({":k": organization_id, ":p": prefix}),
            ConsistentRead=True)
        return [reading_from_item(i, organization_id) for i in items]

    # --- leases -----------------------------------------------------------------------------
    def _acquire_lease(
        self, organization_id: str, name: str, owner: str, now: datetime, expires_at: datetime
    ) -> Lease:
        try:
            out = self._call(
                "update_item", CONDITION_FAILED, TableName=self._table,
                Key=serialize({PK: organization_id, SK: LEASE_PREFIX + name}),
                UpdateExpression=("SET #name = :n, #owner = :o, #exp = :e, "
                                  "#version = if_not_exists(#version, :zero) + :one"),
                ConditionExpression="attribute_not_exists(row_id) OR #exp <= :now OR #owner = :o",
                ExpressionAttributeNames={"#name": "name", "#owner": "owner",
                                          "#exp": "expires_at", "#version": "version"},
                ExpressionAttributeValues=serialize({
                    ":n": name, ":o": owner, ":e": to_micros(expires_at), ":zero": 0, ":one": 1,
                    ":now": to_micros(now)}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except botocore.exceptions.ClientError as exc:
            held = lease_from_dict(deserialize(old_item(exc) or {}),
                                   f"{organization_id}/{LEASE_PREFIX}{name}")
            raise LeaseHeldError(name, held.owner, held.expires_at) from None
        return lease_from_dict(deserialize(out["Attributes"]),
                               f"{organization_id}/{LEASE_PREFIX}{name}")

    def _renew_lease(self, lease: Lease, expires_at: datetime) -> Lease:
        try:
            out = self._call(
                "update_item", CONDITION_FAILED, TableName=self._table,
                Key=serialize({PK: lease.organization_id, SK: LEASE_PREFIX + lease.name}),
                UpdateExpression="SET #exp = :e, #version = #version + :one",
                ConditionExpression="#owner = :o AND #version = :v",
                ExpressionAttributeNames={"#owner": "owner", "#exp": "expires_at",
                                          "#version": "version"},
                ExpressionAttributeValues=serialize({":e": to_micros(expires_at), ":one": 1,
                                                ":o": lease.owner, ":v": lease.version}),
                ReturnValues="ALL_NEW",
            )
        except botocore.exceptions.ClientError:
            raise LeaseLostError(
                f"lease {lease.name!r} is no longer held by {lease.owner!r}") from None
        return lease_from_dict(deserialize(out["Attributes"]),
                               f"{lease.organization_id}/{LEASE_PREFIX}{lease.name}")

    def release_lease(self, lease: Lease) -> bool:
        try:
            self._call(
                "delete_item", CONDITION_FAILED, TableName=self._table,
                Key=serialize({PK: lease.organization_id, SK: LEASE_PREFIX + lease.name}),
                ConditionExpression="#owner = :o AND #version = :v",
                ExpressionAttributeNames={"#owner": "owner", "#version": "version"},
                ExpressionAttributeValues=serialize({":o": lease.owner, ":v": lease.version}))
        except botocore.exceptions.ClientError:
            return False
        return True

    def get_lease(self, organization_id: str, name: str) -> Lease | None:
        check_key_part(organization_id, "organization_id")
        check_text(name, "lease name", 256)
        item = self._get(serialize({PK: organization_id, SK: LEASE_PREFIX + name}))
        return None if item is None else lease_from_dict(item, f"{organization_id}/{item[SK]}")

    # --- change feed ----------------------------------------------------------------------------
    def watch(
        self,
        organization_id: str | None = None,
        kinds: frozenset[RowKind] = ALL_KINDS,
        poll_interval: float | None = None,
    ) -> ChangeFeed:
        return StreamFeed(self._streams, self._stream_arn, organization_id, kinds,
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
