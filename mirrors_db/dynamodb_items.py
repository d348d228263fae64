"""The DynamoDB mirrors table's items: keys, attribute names and codecs.

See :mod:`mirrors_db.dynamodb` for the table's layout.
"""

from __future__ import annotations

import json
from typing import Any

import botocore.exceptions
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from mirrors_db.codec import (
    branch_from_dict,
    branch_to_dict,
    cut_from_dict,
    cut_to_dict,
    group_from_dict,
    group_progress_from_dict,
    group_progress_to_dict,
    group_to_dict,
    lease_from_dict,
    mirror_from_dict,
    reading_from_dict,
    reading_to_dict,
    to_micros,
)
from mirrors_db.errors import (
    MalformedRowError,
    VersionConflictError,
)
from mirrors_db.models import (
    ChangeEvent,
    GroupCut,
    GroupProgress,
    Mirror,
    MirrorBranch,
    MirrorGroup,
    RowKind,
    SensorReading,
)

PK = "organization_id"
SK = "row_id"
BY_SOURCE = "by_source"
BY_DESTINATION = "by_destination"

MIRROR_PREFIX = "mirror#"
BRANCH_PREFIX = "branch#"
LEASE_PREFIX = "lease#"
NAME_PREFIX = "name#"
NAMESPACE_PREFIX = "namespace#"
GROUP_PREFIX = "group#"
GROUP_NAME_PREFIX = "groupname#"
CUT_PREFIX = "cut#"
GROUP_PROGRESS_PREFIX = "gprogress#"
READING_PREFIX = "reading#"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

#: What mirror reads fetch: everything but the index keys, which are derived.
MIRROR_ATTRIBUTES = (PK, SK, "spec", "state", "error", "updated_at", "version")
MIRROR_NAMES = {f"#a{i}": a for i, a in enumerate(MIRROR_ATTRIBUTES)}
MIRROR_PROJECTION: dict[str, Any] = {
    "ProjectionExpression": ", ".join(MIRROR_NAMES),
    "ExpressionAttributeNames": MIRROR_NAMES,
}

CONDITION_FAILED = "ConditionalCheckFailedException"

UNREACHABLE = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
)


def serialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in item.items() if v is not None}


def deserialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def error_code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def old_item(exc: botocore.exceptions.ClientError) -> dict[str, Any] | None:
    """The item a failed condition saw (ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    item = exc.response.get("Item")
    return item if isinstance(item, dict) else None


class TransactionConflict(VersionConflictError):
    """Another transaction was in flight on one of the items (retried a few times)."""


# --- item codecs ---------------------------------------------------------------------
def mirror_item(m: Mirror) -> dict[str, Any]:
    spec = {
        "name": m.name,
        "source_region": m.source_region,
        "source_repository": m.source_repository,
        "destination_region": m.destination_region,
        "storage_namespace": m.storage_namespace,
        "created_at": to_micros(m.created_at),
    }
    if m.storage_id:  # rows of mirrors on the default store stay as they were
        spec["storage_id"] = m.storage_id
    return {
        PK: m.organization_id,
        SK: MIRROR_PREFIX + m.id,
        "spec": json.dumps(spec, separators=(",", ":"), ensure_ascii=False),
        "state": m.state.value,
        "error": m.error or None,
        "updated_at": to_micros(m.updated_at),
        "version": m.version,
        BY_SOURCE: f"{m.organization_id}#{m.source_region}#{m.source_repository}",
        BY_DESTINATION: f"{m.organization_id}#{m.destination_region}",
    }


def mirror_from_item(item: dict[str, Any]) -> Mirror:
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
        "id": str(item.get(SK, ""))[len(MIRROR_PREFIX):],
        "state": item.get("state"),
        "error": item.get("error"),
        "updated_at": item.get("updated_at"),
        "version": item.get("version"),
    }
    return mirror_from_dict(data, key)


def branch_item(p: MirrorBranch) -> dict[str, Any]:
    data = branch_to_dict(p)
    data["error"] = p.error or None
    return {**data, SK: f"{BRANCH_PREFIX}{p.mirror_id}#{p.branch}"}


def branch_key(org: str, mirror_id: str, branch: str) -> dict[str, Any]:
    return serialize({PK: org, SK: f"{BRANCH_PREFIX}{mirror_id}#{branch}"})


def name_guard(m: Mirror) -> dict[str, Any]:
    return serialize({PK: m.organization_id, SK: f"{NAME_PREFIX}{m.destination_region}#{m.name}"})


def namespace_guard(m: Mirror) -> dict[str, Any]:
    return serialize({PK: m.organization_id, SK: NAMESPACE_PREFIX + m.storage_namespace})


def group_item(g: MirrorGroup) -> dict[str, Any]:
    return {**group_to_dict(g), SK: GROUP_PREFIX + g.id}


def group_key(org: str, group_id: str) -> dict[str, Any]:
    return serialize({PK: org, SK: GROUP_PREFIX + group_id})


def group_name_guard(g: MirrorGroup) -> dict[str, Any]:
    return serialize({PK: g.organization_id, SK: GROUP_NAME_PREFIX + g.name})


def cut_sort_key(group_id: str, sequence: int) -> str:
    return f"{CUT_PREFIX}{group_id}#{sequence:012d}"


def cut_item(c: GroupCut) -> dict[str, Any]:
    return {**cut_to_dict(c), SK: cut_sort_key(c.group_id, c.sequence)}


def group_progress_item(p: GroupProgress) -> dict[str, Any]:
    data = group_progress_to_dict(p)
    data["error"] = p.error or None
    data["waiting_for"] = p.waiting_for or None
    return {**data, SK: GROUP_PROGRESS_PREFIX + p.group_id}


def group_progress_key(org: str, group_id: str) -> dict[str, Any]:
    return serialize({PK: org, SK: GROUP_PROGRESS_PREFIX + group_id})


def reading_sort_key(destination_region: str, source_region: str, page: int) -> str:
    return f"{READING_PREFIX}{destination_region}#{source_region}#{page:06d}"


def reading_item(r: SensorReading) -> dict[str, Any]:
    return {**reading_to_dict(r), SK: reading_sort_key(r.destination_region,
                                                       r.source_region, r.page)}


def reading_from_item(item: dict[str, Any], org: str) -> SensorReading:
    return reading_from_dict(item, f"{org}/{item[SK]}")


def _group_event(org: str, row_id: str, deleted: bool,
                 image: dict[str, Any] | None) -> ChangeEvent | None:
    where = f"{org}/{row_id}"
    if row_id.startswith(GROUP_PREFIX):
        row: Any = None if image is None else group_from_dict(image, where)
        return ChangeEvent(RowKind.GROUP, org, (row_id[len(GROUP_PREFIX):],), deleted, row)
    if row_id.startswith(GROUP_PROGRESS_PREFIX):
        row = None if image is None else group_progress_from_dict(image, where)
        return ChangeEvent(RowKind.GROUP_PROGRESS, org, (row_id[len(GROUP_PROGRESS_PREFIX):],),
                           deleted, row)
    if row_id.startswith(CUT_PREFIX):
        group_id, _, seq = row_id[len(CUT_PREFIX):].rpartition("#")
        row = None if image is None else cut_from_dict(image, where)
        return ChangeEvent(RowKind.CUT, org, (group_id, str(int(seq))), deleted, row)
    return None


def event_from_record(record: dict[str, Any]) -> ChangeEvent | None:
    """A change event from a stream record; None for guard items."""
    data = record["dynamodb"]
    keys = deserialize(data["Keys"])
    org, row_id = str(keys[PK]), str(keys[SK])
    deleted = record.get("eventName") == "REMOVE"
    image = None if deleted else deserialize(data.get("NewImage", {}))
    if image is not None and set(image) <= {PK, SK}:
        # an image of the keys alone carries no row: an emulator's first step of an
        # update that creates the item (moto sends it before the full image)
        return None
    if row_id.startswith(MIRROR_PREFIX):
        row: Any = None if image is None else mirror_from_item(image)
        return ChangeEvent(RowKind.MIRROR, org, (row_id[len(MIRROR_PREFIX):],), deleted, row)
    if row_id.startswith(BRANCH_PREFIX):
        mirror_id, _, branch = row_id[len(BRANCH_PREFIX):].partition("#")
        row = None if image is None else branch_from_dict(image, f"{org}/{row_id}")
        return ChangeEvent(RowKind.BRANCH, org, (mirror_id, branch), deleted, row)
    if row_id.startswith(LEASE_PREFIX):
        row = None if image is None else lease_from_dict(image, f"{org}/{row_id}")
        return ChangeEvent(RowKind.LEASE, org, (row_id[len(LEASE_PREFIX):],), deleted, row)
    return _group_event(org, row_id, deleted, image)
