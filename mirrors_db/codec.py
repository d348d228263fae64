"""Plain-dict encoding of rows, shared by the backends and the change feeds.

Times are integers of microseconds since the epoch (UTC) on every backend, so
that expiry comparisons happen in the database and rows read back exactly.
Decoding checks every field and raises MalformedRowError naming the row.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from mirrors_db.errors import InvalidMirrorArgumentError, MalformedRowError
from mirrors_db.models import (
    ChangeEvent,
    GroupCut,
    GroupMember,
    GroupProgress,
    Lease,
    Mirror,
    MirrorBranch,
    MirrorGroup,
    MirrorState,
    RowKind,
    SensorReading,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(value: datetime) -> int:
    """A timezone-aware datetime as integer microseconds since the epoch."""
    if value.tzinfo is None:
        raise InvalidMirrorArgumentError("datetimes must be timezone-aware")
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """Inverse of to_micros."""
    return datetime.fromtimestamp(value // 1_000_000, UTC).replace(
        microsecond=value % 1_000_000
    )


class _Reader:
    """Typed field access on a decoded row; failures name the row."""

    def __init__(self, data: Mapping[Any, Any], key: str) -> None:
        self.data = data
        self.key = key

    def fail(self, reason: str) -> MalformedRowError:
        return MalformedRowError(self.key, reason)

    def text(self, name: str) -> str:
        value = self.data.get(name)
        if not isinstance(value, str):
            raise self.fail(f"field {name!r} must be a string, got {value!r}")
        return value

    def opt_text(self, name: str) -> str | None:
        return None if self.data.get(name) is None else self.text(name)

    def integer(self, name: str) -> int:
        value = self.data.get(name)
        # DynamoDB numbers decode as Decimal; accept any integral number.
        try:
            if isinstance(value, bool) or value is None or int(value) != value:
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise self.fail(f"field {name!r} must be an integer, got {value!r}") from None

    def count(self, name: str) -> int:
        return 0 if self.data.get(name) is None else self.integer(name)

    def time(self, name: str) -> datetime:
        return from_micros(self.integer(name))

    def opt_time(self, name: str) -> datetime | None:
        return None if self.data.get(name) is None else self.time(name)


# --- mirrors ---------------------------------------------------------------------
def mirror_to_dict(mirror: Mirror) -> dict[str, Any]:
    """Encode a mirror as a JSON-ready dict."""
    return {
        "organization_id": mirror.organization_id,
        "id": mirror.id,
        "name": mirror.name,
        "source_region": mirror.source_region,
        "source_repository": mirror.source_repository,
        "destination_region": mirror.destination_region,
        "storage_namespace": mirror.storage_namespace,
        "storage_id": mirror.storage_id,
        "state": mirror.state.value,
        "error": mirror.error,
        "created_at": to_micros(mirror.created_at),
        "updated_at": to_micros(mirror.updated_at),
        "version": mirror.version,
    }


def mirror_from_dict(data: Mapping[Any, Any], key: str) -> Mirror:
    """Decode a mirror; ``key`` names the row in errors.

    Raises:
        MalformedRowError: A field is missing or has the wrong type or value.
    """
    r = _Reader(data, key)
    state_text = r.text("state")
    try:
        state = MirrorState(state_text)
    except ValueError:
        raise r.fail(f"unknown state {state_text!r}") from None
    return Mirror(
        organization_id=r.text("organization_id"),
        id=r.text("id"),
        name=r.text("name"),
        source_region=r.text("source_region"),
        source_repository=r.text("source_repository"),
        destination_region=r.text("destination_region"),
        storage_namespace=r.text("storage_namespace"),
        storage_id=r.opt_text("storage_id") or "",
        state=state,
        error=r.opt_text("error") or "",
        created_at=r.time("created_at"),
        updated_at=r.time("updated_at"),
        version=r.integer("version"),
    )


# --- branch progress --------------------------------------------------------------
def branch_to_dict(progress: MirrorBranch) -> dict[str, Any]:
    """Encode branch progress as a JSON-ready dict."""
    return {
        "organization_id": progress.organization_id,
        "mirror_id": progress.mirror_id,
        "branch": progress.branch,
        "source_head": progress.source_head,
        "source_head_seen_at": _opt_micros(progress.source_head_seen_at),
        "pending_commit": progress.pending_commit,
        "promoted_commit": progress.promoted_commit,
        "promoted_at": _opt_micros(progress.promoted_at),
        "missing_ranges": progress.missing_ranges,
        "missing_objects": progress.missing_objects,
        "error": progress.error,
        "updated_at": _opt_micros(progress.updated_at),
        "version": progress.version,
        "source_seen_at": _opt_micros(progress.source_seen_at),
        "source_confirmed_at": _opt_micros(progress.source_confirmed_at),
    }


def branch_from_dict(data: Mapping[Any, Any], key: str) -> MirrorBranch:
    """Decode branch progress; raises MalformedRowError."""
    r = _Reader(data, key)
    return MirrorBranch(
        organization_id=r.text("organization_id"),
        mirror_id=r.text("mirror_id"),
        branch=r.text("branch"),
        source_head=r.opt_text("source_head"),
        source_head_seen_at=r.opt_time("source_head_seen_at"),
        pending_commit=r.opt_text("pending_commit"),
        promoted_commit=r.opt_text("promoted_commit"),
        promoted_at=r.opt_time("promoted_at"),
        missing_ranges=r.count("missing_ranges"),
        missing_objects=r.count("missing_objects"),
        error=r.opt_text("error") or "",
        updated_at=r.time("updated_at"),
        version=r.integer("version"),
        source_seen_at=r.opt_time("source_seen_at"),
        source_confirmed_at=r.opt_time("source_confirmed_at"),
    )


# --- leases -----------------------------------------------------------------------
def lease_to_dict(lease: Lease) -> dict[str, Any]:
    """Encode a lease as a JSON-ready dict."""
    return {
        "organization_id": lease.organization_id,
        "name": lease.name,
        "owner": lease.owner,
        "expires_at": to_micros(lease.expires_at),
        "version": lease.version,
    }


def lease_from_dict(data: Mapping[Any, Any], key: str) -> Lease:
    """Decode a lease; raises MalformedRowError."""
    r = _Reader(data, key)
    return Lease(
        organization_id=r.text("organization_id"),
        name=r.text("name"),
        owner=r.text("owner"),
        expires_at=r.time("expires_at"),
        version=r.integer("version"),
    )


# --- groups, cuts, group progress ----------------------------------------------------
def members_to_json(members: tuple[GroupMember, ...]) -> str:
    return json.dumps([[m.mirror_id, m.branch] for m in members], separators=(",", ":"),
                      ensure_ascii=False)


def heads_to_json(heads: Mapping[GroupMember, str]) -> str:
    return json.dumps([[m.mirror_id, m.branch, c] for m, c in heads.items()],
                      separators=(",", ":"), ensure_ascii=False)


def _json_list(r: _Reader, name: str, width: int) -> list[list[str]]:
    try:
        value = json.loads(r.text(name))
        if not isinstance(value, list) or not all(
                isinstance(v, list) and len(v) == width and all(isinstance(x, str) for x in v)
                for v in value):
            raise ValueError(f"a list of {width}-string lists")
    except ValueError as exc:
        raise r.fail(f"field {name!r}: {exc}") from None
    return value


def group_to_dict(group: MirrorGroup) -> dict[str, Any]:
    """Encode a mirror group as a JSON-ready dict."""
    return {
        "organization_id": group.organization_id,
        "id": group.id,
        "name": group.name,
        "source_region": group.source_region,
        "destination_region": group.destination_region,
        "members": members_to_json(group.members),
        "last_cut": group.last_cut,
        "heads_read_at": _opt_micros(group.heads_read_at),
        "created_at": to_micros(group.created_at),
        "updated_at": to_micros(group.updated_at),
        "version": group.version,
    }


def group_from_dict(data: Mapping[Any, Any], key: str) -> MirrorGroup:
    """Decode a mirror group; raises MalformedRowError."""
    r = _Reader(data, key)
    return MirrorGroup(
        organization_id=r.text("organization_id"),
        id=r.text("id"),
        name=r.text("name"),
        source_region=r.text("source_region"),
        destination_region=r.text("destination_region"),
        members=tuple(GroupMember(m, b) for m, b in _json_list(r, "members", 2)),
        last_cut=r.count("last_cut"),
        heads_read_at=r.opt_time("heads_read_at"),
        created_at=r.time("created_at"),
        updated_at=r.time("updated_at"),
        version=r.integer("version"),
    )


def cut_to_dict(cut: GroupCut) -> dict[str, Any]:
    """Encode a cut as a JSON-ready dict."""
    return {
        "organization_id": cut.organization_id,
        "group_id": cut.group_id,
        "sequence": cut.sequence,
        "heads": heads_to_json(cut.heads),
        "taken_at": to_micros(cut.taken_at),
        "reason": cut.reason,
    }


def cut_from_dict(data: Mapping[Any, Any], key: str) -> GroupCut:
    """Decode a cut; raises MalformedRowError."""
    r = _Reader(data, key)
    return GroupCut(
        organization_id=r.text("organization_id"),
        group_id=r.text("group_id"),
        sequence=r.integer("sequence"),
        heads={GroupMember(m, b): c for m, b, c in _json_list(r, "heads", 3)},
        taken_at=r.time("taken_at"),
        reason=r.text("reason"),
    )


def group_progress_to_dict(p: GroupProgress) -> dict[str, Any]:
    """Encode a group's progress as a JSON-ready dict."""
    return {
        "organization_id": p.organization_id,
        "group_id": p.group_id,
        "served_cut": p.served_cut,
        "served_taken_at": _opt_micros(p.served_taken_at),
        "served_at": _opt_micros(p.served_at),
        "waiting_cut": p.waiting_cut,
        "waiting_for": p.waiting_for,
        "error": p.error,
        "updated_at": _opt_micros(p.updated_at),
        "version": p.version,
    }


def group_progress_from_dict(data: Mapping[Any, Any], key: str) -> GroupProgress:
    """Decode a group's progress; raises MalformedRowError."""
    r = _Reader(data, key)
    return GroupProgress(
        organization_id=r.text("organization_id"),
        group_id=r.text("group_id"),
        served_cut=r.count("served_cut"),
        served_taken_at=r.opt_time("served_taken_at"),
        served_at=r.opt_time("served_at"),
        waiting_cut=r.count("waiting_cut"),
        waiting_for=r.opt_text("waiting_for") or "",
        error=r.opt_text("error") or "",
        updated_at=r.time("updated_at"),
        version=r.integer("version"),
    )


def reading_to_dict(r: SensorReading) -> dict[str, Any]:
    """Encode a page of a sensor reading as a JSON-ready dict."""
    return {
        "organization_id": r.organization_id,
        "destination_region": r.destination_region,
        "source_region": r.source_region,
        "page": r.page,
        "read_at": to_micros(r.read_at),
        "confirmed": json.dumps({m: list(b) for m, b in sorted(r.confirmed.items())},
                                separators=(",", ":")),
    }


def reading_from_dict(data: Mapping[Any, Any], key: str) -> SensorReading:
    """Decode a page of a sensor reading; raises MalformedRowError."""
    r = _Reader(data, key)
    try:
        confirmed = json.loads(r.text("confirmed"))
        if not isinstance(confirmed, dict) or not all(
                isinstance(b, list) and all(isinstance(x, str) for x in b)
                for b in confirmed.values()):
            raise ValueError
    except ValueError:
        raise r.fail("field 'confirmed' must map mirror ids to lists of branches") from None
    return SensorReading(
        organization_id=r.text("organization_id"),
        destination_region=r.text("destination_region"),
        source_region=r.text("source_region"),
        page=r.integer("page"),
        read_at=r.time("read_at"),
        confirmed={str(m): tuple(b) for m, b in confirmed.items()},
    )


# --- change events ------------------------------------------------------------------
_ENCODERS: dict[RowKind, Callable[[Any], dict[str, Any]]] = {
    RowKind.MIRROR: mirror_to_dict, RowKind.BRANCH: branch_to_dict, RowKind.LEASE: lease_to_dict,
    RowKind.GROUP: group_to_dict, RowKind.CUT: cut_to_dict,
    RowKind.GROUP_PROGRESS: group_progress_to_dict,
}
_DECODERS: dict[RowKind, Callable[[Mapping[Any, Any], str], Any]] = {
    RowKind.MIRROR: mirror_from_dict, RowKind.BRANCH: branch_from_dict,
    RowKind.LEASE: lease_from_dict, RowKind.GROUP: group_from_dict, RowKind.CUT: cut_from_dict,
    RowKind.GROUP_PROGRESS: group_progress_from_dict,
}


def event_to_json(event: ChangeEvent, *, include_row: bool = True) -> str:
    """Encode a change event as compact JSON (for NOTIFY payloads and change logs)."""
    body: dict[str, Any] = {
        "kind": event.kind.value,
        "org": event.organization_id,
        "key": list(event.key),
        "deleted": event.deleted,
    }
    if include_row and event.row is not None:
        body["row"] = _ENCODERS[event.kind](event.row)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def event_from_json(text: str) -> tuple[ChangeEvent, bool]:
    """Decode event_to_json output.

    Returns:
        The event, and whether the row was left out (the reader should fetch it).

    Raises:
        MalformedRowError: The payload is not a change event.
    """
    try:
        body = json.loads(text)
        kind = RowKind(body["kind"])
        org = body["org"]
        key = tuple(body["key"])
        deleted = bool(body["deleted"])
        if not isinstance(org, str) or not all(isinstance(k, str) for k in key):
            raise TypeError("organization and key must be strings")
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedRowError("change event", str(exc)) from None
    row_data = body.get("row")
    row = None if row_data is None else _DECODERS[kind](row_data, f"{org}/{'/'.join(key)}")
    return ChangeEvent(kind, org, key, deleted, row), (row is None and not deleted)


# --- page tokens ----------------------------------------------------------------------
def encode_page_token(last_id: str) -> str:
    """An opaque token that resumes a listing after mirror ``last_id``."""
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_page_token(token: str | None) -> str | None:
    """The mirror id a token resumes after; raises InvalidMirrorArgumentError."""
    if token is None or token == "":
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        return base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidMirrorArgumentError(f"invalid page token {token!r}") from None


def _opt_micros(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)
