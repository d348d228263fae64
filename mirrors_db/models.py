"""Rows of the mirrors table and the mirror state machine.

Every row belongs to an organization (the partition key on every backend) and
carries a ``version`` that each write bumps by one; writers pass the version they
read, and a write whose version no longer matches fails (compare-and-swap).

One writer per row. DynamoDB global tables settle concurrent writes to one item
by last-writer-wins over the *whole item*, so giving each field one writing side
is not enough: each row kind below names the region whose sidecar may write it.
Within that region, several replicas race through the version CAS and share work
through leases.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum

from mirrors_db.errors import InvalidMirrorArgumentError, InvalidStateTransitionError

#: Returns the current time, timezone-aware. Injected so that tests and callers in
#: other clock domains control lease expiry.
Clock = Callable[[], datetime]

#: Longest error text kept on a row; longer texts are cut (rows must stay small
#: enough for a PostgreSQL NOTIFY payload and a DynamoDB item).
MAX_ERROR_LENGTH = 2000
MAX_ID_LENGTH = 256
#: the largest page of a mirror listing
MAX_PAGE_SIZE = 10_000
MAX_NAMESPACE_LENGTH = 1024


def utc_now() -> datetime:
    """The default clock: the current time in UTC."""
    return datetime.now(UTC)


class MirrorState(StrEnum):
    """Lifecycle of a mirror.

    ``creating`` -> ``active`` -> ``deleting`` -> ``deleted``; any state but
    ``deleted`` and ``detached`` may fall to ``failed``, and a failed mirror can only be
    deleted. An active mirror may be ``detached`` (its repository became an ordinary
    writable one: a normal end state, not a failure), and a detached mirror's row may
    then be deleted (its repository stays). Staying in the same state (to change the
    error text) is allowed, except in ``deleted``, which is final.
    """

    CREATING = "creating"
    ACTIVE = "active"
    DELETING = "deleting"
    DELETED = "deleted"
    FAILED = "failed"
    DETACHED = "detached"

    @property
    def is_live(self) -> bool:
        """Whether the mirror still holds its name and storage namespace."""
        return self is not MirrorState.DELETED

    def can_become(self, new: MirrorState) -> bool:
        """Whether the state machine allows moving from this state to ``new``."""
        return new in _TRANSITIONS[self]

    @staticmethod
    def predecessors(new: MirrorState) -> frozenset[MirrorState]:
        """States from which ``new`` may be reached (the write's condition)."""
        return frozenset(s for s, nexts in _TRANSITIONS.items() if new in nexts)


_TRANSITIONS: dict[MirrorState, frozenset[MirrorState]] = {
    MirrorState.CREATING: frozenset(
        {MirrorState.CREATING, MirrorState.ACTIVE, MirrorState.FAILED, MirrorState.DELETING}
    ),
    MirrorState.ACTIVE: frozenset({MirrorState.ACTIVE, MirrorState.FAILED, MirrorState.DELETING,
                                   MirrorState.DETACHED}),
    MirrorState.DELETING: frozenset(
        {MirrorState.DELETING, MirrorState.DELETED, MirrorState.FAILED}
    ),
    MirrorState.FAILED: frozenset({MirrorState.FAILED, MirrorState.DELETING}),
    MirrorState.DETACHED: frozenset({MirrorState.DETACHED, MirrorState.DELETING}),
    MirrorState.DELETED: frozenset(),
}


def new_mirror_id() -> str:
    """A new mirror id: 12 hex digits of milliseconds then 12 random hex digits.

    Ids sort by creation time, so listings come out oldest first.
    """
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


@dataclass(frozen=True)
class MirrorSpec:
    """What a client asks for when it creates a mirror.

    Attributes:
        organization_id: The partition all regions share (``organization_id`` in
            the replication config).
        name: Name of the read-only mirror repository in the destination region;
            unique per organization and destination region among live mirrors.
        source_region: Region of the source repository.
        source_repository: The repository being mirrored.
        destination_region: Region where the mirror repository lives.
        storage_namespace: Destination storage namespace; unique per
            organization among live mirrors.
        id: The mirror id; generated when not given.
        storage_id: The destination region's blockstore (its ``blockstores.stores``
            id) that holds the mirror repository; ``""`` for its default store.
    """

    organization_id: str
    name: str
    source_region: str
    source_repository: str
    destination_region: str
    storage_namespace: str
    id: str = field(default_factory=new_mirror_id)
    storage_id: str = ""

    def validate(self) -> None:
        """Raise InvalidMirrorArgumentError if a field is empty, too long or has ``#``."""
        check_key_part(self.organization_id, "organization_id")
        check_key_part(self.id, "mirror id")
        check_key_part(self.name, "mirror name")
        check_key_part(self.source_region, "source_region")
        check_key_part(self.source_repository, "source_repository")
        check_key_part(self.destination_region, "destination_region")
        check_text(self.storage_namespace, "storage_namespace", MAX_NAMESPACE_LENGTH)
        if self.storage_id:
            check_key_part(self.storage_id, "storage_id")


@dataclass(frozen=True)
class Mirror:
    """A mirror row.

    Writers (see the module docstring for why this matters):

    * ``id``, ``name``, ``source_region``, ``source_repository``,
      ``destination_region``, ``storage_namespace``, ``storage_id``, ``created_at``: written
      once, when the mirror is created by the region that serves the POST
      (the source side). Never updated.
    * ``state`` and ``error``: the destination region's mirrors manager
      (``creating`` -> ``active``, ``deleting`` -> ``deleted``, ``failed``). The
      only other write is the deletion request (-> ``deleting``), made by the
      side that serves DELETE; on a global table that request should be applied
      through the destination region so that the row keeps a single writer.
    * ``updated_at`` and ``version``: set by the table on every write.
    """

    organization_id: str
    id: str
    name: str
    source_region: str
    source_repository: str
    destination_region: str
    storage_namespace: str
    state: MirrorState
    error: str
    created_at: datetime
    updated_at: datetime
    version: int
    #: the destination region's store of the mirror repository ("": its default)
    storage_id: str = ""

    @property
    def spec(self) -> MirrorSpec:
        """The immutable part of the row."""
        return MirrorSpec(
            organization_id=self.organization_id,
            name=self.name,
            source_region=self.source_region,
            source_repository=self.source_repository,
            destination_region=self.destination_region,
            storage_namespace=self.storage_namespace,
            id=self.id,
            storage_id=self.storage_id,
        )

    def with_state(self, state: MirrorState, error: str = "") -> Mirror:
        """A copy in ``state`` with ``error``, for ``MirrorsTable.update_mirror``.

        Raises:
            InvalidStateTransitionError: The state machine forbids the move.
        """
        if not self.state.can_become(state):
            raise InvalidStateTransitionError(self.state.value, state.value, self.id)
        return replace(self, state=state, error=error)


@dataclass(frozen=True)
class MirrorBranch:
    """Replication progress of one branch of a mirror.

    The whole row is written by the destination region's sidecar: the commit
    sensor sets ``source_head``, ``source_head_seen_at``, ``pending_commit``,
    ``source_seen_at`` and ``source_confirmed_at``;
    the validator sets ``missing_ranges``, ``missing_objects`` and ``error``; the
    promoter sets ``promoted_commit`` and ``promoted_at``. ``version`` 0 means "not
    stored yet": pass such a row to ``put_branch_progress`` to create it.

    Attributes:
        source_head: Last head of the source branch the sensor saw.
        source_head_seen_at: When that head was first seen (for lag).
        pending_commit: The commit being validated for promotion, if any.
        promoted_commit: Current head of the mirror branch.
        promoted_at: When the mirror branch last moved.
        missing_ranges: Ranges and metaranges of ``pending_commit`` not yet present.
        missing_objects: Objects of ``pending_commit`` not yet present.
        error: Last validation or promotion error, empty when fine.
        source_seen_at: When the destination last read the source branch's head.
        source_confirmed_at: When the destination last read the source branch's head
            and found it equal to what the mirror branch serves: every commit made on
            the source before then is on the mirror, so ``now - source_confirmed_at``
            bounds what the mirror may be missing (the honest lag).
    """

    organization_id: str
    mirror_id: str
    branch: str
    source_head: str | None = None
    source_head_seen_at: datetime | None = None
    pending_commit: str | None = None
    promoted_commit: str | None = None
    promoted_at: datetime | None = None
    missing_ranges: int = 0
    missing_objects: int = 0
    error: str = ""
    updated_at: datetime | None = None
    version: int = 0
    source_seen_at: datetime | None = None
    source_confirmed_at: datetime | None = None

    def validate(self) -> None:
        """Raise InvalidMirrorArgumentError if a key part or a count is bad."""
        check_branch_key(self.organization_id, self.mirror_id, self.branch)
        for name in ("source_head", "pending_commit", "promoted_commit"):
            value = getattr(self, name)
            if value is not None:
                check_text(value, name, MAX_ID_LENGTH)
        if self.missing_ranges < 0 or self.missing_objects < 0:
            raise InvalidMirrorArgumentError("missing counts cannot be negative")


@dataclass(frozen=True)
class Lease:
    """A time-limited claim on a piece of work, shared by the replicas of one region.

    Lease names should include the region (for example ``"us-west-2/mirror/<id>"``):
    a lease is only exclusive among writers that reach the same copy of the table.
    ``version`` grows with every acquisition and renewal, so it doubles as a
    fencing token.
    """

    organization_id: str
    name: str
    owner: str
    expires_at: datetime
    version: int

    def is_expired(self, now: datetime) -> bool:
        """Whether the lease has run out at ``now``."""
        return self.expires_at <= now


#: the most mirrors (member branches) one group holds: a cut's heads are read, and
#: promoted, in one transaction of each region's refstore
MAX_GROUP_MEMBERS = 32
#: cuts kept per group (older ones are dropped as new ones are taken)
CUTS_KEPT = 100


@dataclass(frozen=True)
class GroupMember:
    """One member of a mirror group: a mirror, and the branch of it the group moves."""

    mirror_id: str
    branch: str


@dataclass(frozen=True)
class GroupSpec:
    """What a client asks for when it creates a mirror group.

    Attributes:
        organization_id: The partition all regions share.
        name: Unique per organization.
        source_region: The region of every member's source repository.
        destination_region: The region of every member's mirror repository.
        members: The member branches, at most :data:`MAX_GROUP_MEMBERS`.
        id: The group id; generated when not given.
    """

    organization_id: str
    name: str
    source_region: str
    destination_region: str
    members: tuple[GroupMember, ...] = ()
    id: str = field(default_factory=new_mirror_id)

    def validate(self) -> None:
        """Raise InvalidMirrorArgumentError if a field is empty, too long or has ``#``."""
        check_key_part(self.organization_id, "organization_id")
        check_key_part(self.id, "group id")
        check_key_part(self.name, "group name")
        check_key_part(self.source_region, "source_region")
        check_key_part(self.destination_region, "destination_region")
        check_members(self.members)


@dataclass(frozen=True)
class MirrorGroup:
    """A mirror group row: mirrors whose member branches a region advances together.

    Writers: every field is written by the *source* region's sidecar (it serves the
    group's creation, its members and its deletion, and takes its cuts); ``last_cut``
    and ``heads_read_at`` change only with a cut (``MirrorsTable.add_cut``) or when the
    source reads the member heads and finds them at the last cut. ``updated_at`` and
    ``version`` are set by the table on every write.

    Attributes:
        last_cut: Sequence number of the group's newest cut (0: none yet).
        heads_read_at: When the source last read the member heads at one snapshot and
            found them equal to the newest cut's: every commit made on a member branch
            before then is in that cut (what a destination's honest lag counts from).
    """

    organization_id: str
    id: str
    name: str
    source_region: str
    destination_region: str
    members: tuple[GroupMember, ...]
    last_cut: int
    heads_read_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int


@dataclass(frozen=True)
class GroupCut:
    """A cut: the heads of a group's member branches, read at one snapshot of the source
    region's refstore. Written once by the source region, never updated.

    Attributes:
        sequence: 1, 2, ... in the order the source read them.
        heads: Each member's head; a member whose branch had no head is absent.
        taken_at: When the source read them.
        reason: ``moved`` (a member head moved) or ``requested`` (through the API).
    """

    organization_id: str
    group_id: str
    sequence: int
    heads: dict[GroupMember, str]
    taken_at: datetime
    reason: str


@dataclass(frozen=True)
class GroupProgress:
    """Where a group stands in its destination region; written by that region's sidecar
    only. ``version`` 0 means "not stored yet".

    Attributes:
        served_cut: The cut every member branch serves (0: none yet).
        served_taken_at: When the source read that cut.
        served_at: When the destination promoted it.
        waiting_cut: The newer cut the destination waits to complete (0: none).
        waiting_for: What that cut still lacks, in words.
        error: The last round's error, empty when fine.
    """

    organization_id: str
    group_id: str
    served_cut: int = 0
    served_taken_at: datetime | None = None
    served_at: datetime | None = None
    waiting_cut: int = 0
    waiting_for: str = ""
    error: str = ""
    updated_at: datetime | None = None
    version: int = 0


#: mirrors a sensor reading's page lists at most (a page is one row)
SENSOR_READING_PAGE = 500
#: branches a sensor reading's page lists at most, over all its mirrors (so that a page
#: stays well within a DynamoDB item's 400 KB)
SENSOR_READING_BRANCHES = 1000


@dataclass(frozen=True)
class SensorReading:
    """One page of a sensor's reading: at ``read_at`` the destination region's sensor
    read the heads of its mirrors' sources in the source region at once, and found each
    mirror in ``confirmed`` serving every one of the listed branches' source heads.

    It stands for the per-branch confirmations (``source_seen_at``,
    ``source_confirmed_at``) of those branches, so that confirming idle mirrors costs
    a write per :data:`SENSOR_READING_PAGE` mirrors rather than one per branch. Written
    by the destination region's sensor only; a page is replaced only by a newer reading.

    Attributes:
        page: Which page of the reading (a reading of more mirrors than a page holds
            spans several rows).
        confirmed: Mirror id -> the branches the reading confirmed.
    """

    organization_id: str
    destination_region: str
    source_region: str
    page: int
    read_at: datetime
    confirmed: dict[str, tuple[str, ...]]

    def validate(self) -> None:
        """Raise InvalidMirrorArgumentError if a key part or the size is bad."""
        check_key_part(self.organization_id, "organization_id")
        check_key_part(self.destination_region, "destination region")
        check_key_part(self.source_region, "source region")
        if self.page < 0:
            raise InvalidMirrorArgumentError("a reading's page cannot be negative")
        if len(self.confirmed) > SENSOR_READING_PAGE:
            raise InvalidMirrorArgumentError(
                f"a reading's page lists at most {SENSOR_READING_PAGE} mirrors")
        if sum(len(b) for b in self.confirmed.values()) > SENSOR_READING_BRANCHES:
            raise InvalidMirrorArgumentError(
                f"a reading's page lists at most {SENSOR_READING_BRANCHES} branches")
        for mirror_id, branches in self.confirmed.items():
            for branch in branches:
                check_branch_key(self.organization_id, mirror_id, branch)


def reading_pages(confirmed: dict[str, tuple[str, ...]]) -> list[dict[str, tuple[str, ...]]]:
    """A reading's confirmations (mirror id -> branches) in pages, by mirror id: each of
    at most :data:`SENSOR_READING_PAGE` mirrors and :data:`SENSOR_READING_BRANCHES`
    branches (a mirror of more branches than that cannot be listed)."""
    pages: list[dict[str, tuple[str, ...]]] = []
    branches = 0
    for mirror_id in sorted(confirmed):
        n = len(confirmed[mirror_id])
        if n > SENSOR_READING_BRANCHES:
            raise InvalidMirrorArgumentError(
                f"mirror {mirror_id!r} has more branches than a reading's page holds")
        if (not pages or len(pages[-1]) == SENSOR_READING_PAGE
                or branches + n > SENSOR_READING_BRANCHES):
            pages.append({})
            branches = 0
        pages[-1][mirror_id] = confirmed[mirror_id]
        branches += n
    return pages


def check_members(members: tuple[GroupMember, ...]) -> None:
    """Members are unique mirror branches, at most MAX_GROUP_MEMBERS of them."""
    if len(members) > MAX_GROUP_MEMBERS:
        raise InvalidMirrorArgumentError(f"a group holds at most {MAX_GROUP_MEMBERS} members")
    for m in members:
        check_key_part(m.mirror_id, "member mirror id")
        check_key_part(m.branch, "member branch")
    if len(set(members)) != len(members):
        raise InvalidMirrorArgumentError("a member appears twice in the group")


class RowKind(StrEnum):
    """Which kind of row a change event is about."""

    MIRROR = "mirror"
    BRANCH = "branch"
    LEASE = "lease"
    GROUP = "group"
    CUT = "cut"
    GROUP_PROGRESS = "group_progress"


@dataclass(frozen=True)
class ChangeEvent:
    """One change delivered by ``MirrorsTable.watch()``.

    Attributes:
        kind: The row kind.
        organization_id: The row's organization.
        key: ``(mirror_id,)`` for mirrors, ``(mirror_id, branch)`` for branch
            progress, ``(name,)`` for leases, ``(group_id,)`` for groups and their
            progress, ``(group_id, sequence)`` for cuts.
        deleted: The row was removed.
        row: The row as written, or None when it was removed.
    """

    kind: RowKind
    organization_id: str
    key: tuple[str, ...]
    deleted: bool
    row: Mirror | MirrorBranch | Lease | MirrorGroup | GroupCut | GroupProgress | None

    @property
    def mirror_id(self) -> str | None:
        """The mirror the event is about (mirror and branch events)."""
        return self.key[0] if self.kind in (RowKind.MIRROR, RowKind.BRANCH) else None


@dataclass(frozen=True)
class ProgressPage:
    """One page of the organization's branch progress rows.

    Attributes:
        rows: Rows on this page, by mirror, then branch.
        next_page_token: Pass to the same listing for the next page; None at the end.
    """

    rows: list[MirrorBranch]
    next_page_token: str | None


@dataclass(frozen=True)
class MirrorPage:
    """One page of a mirror listing.

    Attributes:
        mirrors: Mirrors on this page, ordered by id (oldest first).
        next_page_token: Pass to the same listing for the next page; None at the end.
    """

    mirrors: list[Mirror]
    next_page_token: str | None

    @property
    def has_more(self) -> bool:
        """Whether another page follows."""
        return self.next_page_token is not None


# --- validation helpers ------------------------------------------------------------
def check_text(value: object, what: str, max_length: int) -> None:
    """Reject non-strings, empty strings, over-long strings and control characters."""
    if not isinstance(value, str) or not value:
        raise InvalidMirrorArgumentError(f"{what} must be a non-empty string")
    if len(value) > max_length:
        raise InvalidMirrorArgumentError(f"{what} is longer than {max_length} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidMirrorArgumentError(f"{what} contains control characters")


def check_key_part(value: object, what: str) -> None:
    """Like check_text, and also reject ``#``, which separates parts of row keys."""
    check_text(value, what, MAX_ID_LENGTH)
    assert isinstance(value, str)
    if "#" in value:
        raise InvalidMirrorArgumentError(f"{what} must not contain '#': {value!r}")


def check_branch_key(organization_id: str, mirror_id: str, branch: str) -> None:
    """Validate the three parts that locate a branch progress row."""
    check_key_part(organization_id, "organization_id")
    check_key_part(mirror_id, "mirror id")
    check_text(branch, "branch", MAX_ID_LENGTH)


def check_page_size(page_size: int) -> None:
    """Page sizes are 1..MAX_PAGE_SIZE."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not (
        1 <= page_size <= MAX_PAGE_SIZE
    ):
        raise InvalidMirrorArgumentError(
            f"page size must be 1..{MAX_PAGE_SIZE}, got {page_size!r}")


def clip_error(error: str) -> str:
    """Cut an error text to MAX_ERROR_LENGTH characters."""
    if len(error) <= MAX_ERROR_LENGTH:
        return error
    return error[: MAX_ERROR_LENGTH - 3] + "..."


def default_lease_owner() -> str:
    """An owner id unique to this process on this host: host name and pid."""
    return f"{os.uname().nodename}:{os.getpid()}"
