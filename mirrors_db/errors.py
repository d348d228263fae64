"""Typed errors of the mirrors table.

Each class also derives from the matching ``lakefs_core.errors`` category
(not found, already exists, conflict, validation), so the REST API maps all of
them to status codes in one place.
"""

from __future__ import annotations

from lakefs_core.errors import (
    AlreadyExistsError,
    ConflictError,
    DatabaseError,
    LakeFSError,
    NotFoundError,
    ValidationError,
)


class MirrorsDatabaseError(LakeFSError):
    """Base of every error raised by ``mirrors_db``."""


# --- startup and input ------------------------------------------------------------
class MirrorsDatabaseConfigError(MirrorsDatabaseError, ValidationError):
    """The ``mirrors_database`` configuration is invalid or does not fit the database.

    Raised at startup: unknown type, missing section, missing driver, a table whose
    key schema or stream settings differ from what the backend needs.
    """


class MirrorsDatabaseUnavailableError(MirrorsDatabaseError, DatabaseError):
    """The mirrors database cannot be reached (connection refused, DNS, timeout): the
    REST APIs answer 503, for the client to try again."""


class InvalidMirrorArgumentError(MirrorsDatabaseError, ValidationError):
    """An argument is malformed: an empty or over-long identifier, a bad page token."""


class MalformedRowError(MirrorsDatabaseError):
    """A stored row cannot be decoded (missing field, unknown state, wrong type).

    Attributes:
        key: The row's location, for example ``"my-org/mirror#0190f3..."``.
    """

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"malformed mirrors table row {key}: {reason}")
        self.key = key
        self.reason = reason


# --- not found -----------------------------------------------------------------------
class MirrorNotFoundError(MirrorsDatabaseError, NotFoundError):
    """No mirror with this id in the organization."""

    def __init__(self, organization_id: str, mirror_id: str, detail: str = "") -> None:
        message = f"mirror {mirror_id!r} not found in organization {organization_id!r}"
        super().__init__(f"{message}: {detail}" if detail else message)
        self.organization_id = organization_id
        self.mirror_id = mirror_id


class BranchProgressNotFoundError(MirrorsDatabaseError, NotFoundError):
    """No progress row for this mirror and branch."""

    def __init__(self, organization_id: str, mirror_id: str, branch: str) -> None:
        super().__init__(
            f"no progress for branch {branch!r} of mirror {mirror_id!r} "
            f"in organization {organization_id!r}"
        )
        self.organization_id = organization_id
        self.mirror_id = mirror_id
        self.branch = branch


class GroupNotFoundError(MirrorsDatabaseError, NotFoundError):
    """No mirror group with this id in the organization (or no such cut of it)."""

    def __init__(self, organization_id: str, group_id: str, detail: str = "") -> None:
        message = f"mirror group {group_id!r} not found in organization {organization_id!r}"
        super().__init__(f"{message}: {detail}" if detail else message)
        self.organization_id = organization_id
        self.group_id = group_id


# --- conflicts ------------------------------------------------------------------------
class MirrorExistsError(MirrorsDatabaseError, AlreadyExistsError):
    """A live mirror already uses this id, this name in the destination region, or
    this storage namespace in the organization."""


class GroupExistsError(MirrorsDatabaseError, AlreadyExistsError):
    """A mirror group already has this id or this name in the organization."""


class VersionConflictError(MirrorsDatabaseError, ConflictError):
    """A compare-and-swap lost the race: the row changed since it was read.

    Re-read the row and decide again.
    """


class InvalidStateTransitionError(MirrorsDatabaseError, ConflictError):
    """The mirror's state machine does not allow this transition."""

    def __init__(self, current: str, requested: str, mirror_id: str = "") -> None:
        where = f" for mirror {mirror_id!r}" if mirror_id else ""
        super().__init__(f"cannot move mirror state from {current!r} to {requested!r}{where}")
        self.current = current
        self.requested = requested
        self.mirror_id = mirror_id


class LeaseHeldError(MirrorsDatabaseError, ConflictError):
    """Another owner holds an unexpired lease."""

    def __init__(self, name: str, owner: str, expires_at: object) -> None:
        super().__init__(f"lease {name!r} is held by {owner!r} until {expires_at}")
        self.name = name
        self.owner = owner
        self.expires_at = expires_at


class LeaseLostError(MirrorsDatabaseError, ConflictError):
    """The lease is no longer ours (released, or taken over after it expired)."""
