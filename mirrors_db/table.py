"""The ``MirrorsTable`` interface shared by every backend, and the change feed base.

The base class validates arguments, runs the state machine and builds rows; the
backends only store them. Every write is conditional:

* creating a mirror fails with MirrorExistsError if its id, its name in the
  destination region, or its storage namespace is taken by a live mirror;
* updates name the version they read; a lost race raises VersionConflictError;
* a state change the state machine forbids raises InvalidStateTransitionError
  (checked again inside the write, so a stale reader cannot sneak one through).
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import TracebackType

from mirrors_db.codec import decode_page_token, encode_page_token
from mirrors_db.config import DEFAULT_LIST_MIRRORS_PAGE_SIZE
from mirrors_db.errors import InvalidMirrorArgumentError, MirrorExistsError
from mirrors_db.models import (
    ChangeEvent,
    Clock,
    GroupCut,
    GroupMember,
    GroupProgress,
    GroupSpec,
    Lease,
    Mirror,
    MirrorBranch,
    MirrorGroup,
    MirrorPage,
    MirrorSpec,
    MirrorState,
    ProgressPage,
    RowKind,
    SensorReading,
    check_key_part,
    check_members,
    check_page_size,
    check_text,
    clip_error,
    utc_now,
)

log = logging.getLogger(__name__)

ALL_KINDS = frozenset(RowKind)


@dataclass(frozen=True)
class MirrorFilter:
    """Which mirrors a listing returns (always within one organization)."""

    organization_id: str
    source_region: str | None = None
    source_repository: str | None = None
    destination_region: str | None = None


class MirrorsTable(ABC):
    """The shared table through which every region's sidecar coordinates mirrors.

    Thread-safe: one instance serves all threads of a process. Close it when done.

    Args:
        page_size: Default page size of listings (``list_mirrors_page_size``).
        clock: Source of the current time, used for ``updated_at`` and lease
            expiry; defaults to the system clock in UTC.
    """

    def __init__(
        self, *, page_size: int = DEFAULT_LIST_MIRRORS_PAGE_SIZE, clock: Clock | None = None
    ) -> None:
        check_page_size(page_size)
        self.page_size = page_size
        self.clock: Clock = clock or utc_now

    # --- mirrors ---------------------------------------------------------------------
    def create_mirror(self, spec: MirrorSpec) -> Mirror:
        """Create a mirror in state ``creating`` with version 1.

        Raises:
            MirrorExistsError: The id is taken, or a live mirror already has this
                name in the destination region or this storage namespace.
            InvalidMirrorArgumentError: A field is empty, too long or contains ``#``.
        """
        spec.validate()
        now = self._now()
        mirror = Mirror(
            organization_id=spec.organization_id,
            id=spec.id,
            name=spec.name,
            source_region=spec.source_region,
            source_repository=spec.source_repository,
            destination_region=spec.destination_region,
            storage_namespace=spec.storage_namespace,
            storage_id=spec.storage_id,
            state=MirrorState.CREATING,
            error="",
            created_at=now,
            updated_at=now,
            version=1,
        )
        self._insert_mirror(mirror)
        return mirror

    def import_mirrors(self, mirrors: Sequence[Mirror]) -> None:
        """Store complete mirror rows in bulk, keeping their ids, states and versions.

        For moving an organization from one backend to another and for restoring a
        backup. The uniqueness rules of create_mirror apply. On the SQL backends the
        whole import is one transaction; on DynamoDB it is checked first and then
        written in batches, so run it while nothing else creates mirrors in the
        organization.

        Raises:
            MirrorExistsError: A mirror clashes with a stored one or with another
                mirror of the import; nothing is written.
        """
        names: set[tuple[str, str, str]] = set()
        namespaces: set[tuple[str, str]] = set()
        ids: set[tuple[str, str]] = set()
        for m in mirrors:
            m.spec.validate()
            if m.version < 1:
                raise InvalidMirrorArgumentError(f"mirror {m.id!r}: version must be >= 1")
            if (m.organization_id, m.id) in ids:
                raise MirrorExistsError(f"mirror id {m.id!r} appears twice in the import")
            ids.add((m.organization_id, m.id))
            if m.state.is_live:
                name_key = (m.organization_id, m.destination_region, m.name)
                ns_key = (m.organization_id, m.storage_namespace)
                if name_key in names or ns_key in namespaces:
                    raise MirrorExistsError(
                        f"mirror {m.id!r}: name or storage namespace appears twice among "
                        "live mirrors of the import"
                    )
                names.add(name_key)
                namespaces.add(ns_key)
        if mirrors:
            self._import_mirrors([replace(m, error=clip_error(m.error)) for m in mirrors])

    @abstractmethod
    def get_mirror(self, organization_id: str, mirror_id: str) -> Mirror:
        """Read one mirror (strongly consistent).

        Raises:
            MirrorNotFoundError: No such mirror.
        """

    def list_mirrors(
        self, organization_id: str, page_token: str | None = None, page_size: int | None = None
    ) -> MirrorPage:
        """One page of the organization's mirrors, ordered by id (oldest first).

        Args:
            organization_id: The organization.
            page_token: ``next_page_token`` of the previous page; None for the first.
            page_size: Mirrors per page; defaults to ``list_mirrors_page_size``.
        """
        return self._page(MirrorFilter(organization_id), page_token, page_size)

    def list_mirrors_by_source(
        self,
        organization_id: str,
        source_region: str,
        source_repository: str,
        page_token: str | None = None,
        page_size: int | None = None,
    ) -> MirrorPage:
        """One page of the mirrors of one source repository, ordered by id."""
        check_key_part(source_region, "source_region")
        check_key_part(source_repository, "source_repository")
        return self._page(
            MirrorFilter(organization_id, source_region=source_region,
                         source_repository=source_repository),
            page_token,
            page_size,
        )

    def list_mirrors_by_destination(
        self,
        organization_id: str,
        destination_region: str,
        page_token: str | None = None,
        page_size: int | None = None,
    ) -> MirrorPage:
        """One page of the mirrors whose destination is ``destination_region``, by id.

        On DynamoDB the by-source and by-destination listings read a global
        secondary index, which lags writes slightly; get_mirror is always current.
        """
        check_key_part(destination_region, "destination_region")
        return self._page(
            MirrorFilter(organization_id, destination_region=destination_region),
            page_token,
            page_size,
        )

    def update_mirror(self, mirror: Mirror, expected_version: int | None = None) -> Mirror:
        """Write ``mirror.state`` and ``mirror.error`` if the row is still at the
        expected version. The other fields never change after creation and are
        not written.

        Args:
            mirror: The row as the caller wants it (see Mirror.with_state).
            expected_version: The version the caller read; defaults to
                ``mirror.version``.

        Returns:
            The stored row, with its new version and ``updated_at``.

        Raises:
            MirrorNotFoundError: The mirror does not exist.
            VersionConflictError: The row changed since it was read.
            InvalidStateTransitionError: The stored state cannot move to
                ``mirror.state``.
        """
        check_key_part(mirror.organization_id, "organization_id")
        check_key_part(mirror.id, "mirror id")
        expected = mirror.version if expected_version is None else expected_version
        new = replace(
            mirror, error=clip_error(mirror.error), updated_at=self._now(), version=expected + 1
        )
        return self._update_mirror(new, expected, MirrorState.predecessors(mirror.state))

    @abstractmethod
    def delete_mirror(
        self, organization_id: str, mirror_id: str, expected_version: int | None = None
    ) -> None:
        """Remove a mirror row for good, with its branch progress rows.

        Usually called once the mirror reached ``deleted``; the name and storage
        namespace are free again from the moment the state is ``deleted``.

        Raises:
            MirrorNotFoundError: No such mirror.
            VersionConflictError: ``expected_version`` is given and differs.
        """

    # --- branch progress -----------------------------------------------------------
    @abstractmethod
    def get_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str
    ) -> MirrorBranch:
        """Read one branch's progress.

        Raises:
            BranchProgressNotFoundError: No row for this branch yet.
        """

    @abstractmethod
    def list_branch_progress(self, organization_id: str, mirror_id: str) -> list[MirrorBranch]:
        """Every branch progress row of a mirror, ordered by branch name."""

    def list_all_branch_progress(self, organization_id: str, page_token: str | None = None,
                                 page_size: int | None = None) -> ProgressPage:
        """One page of every mirror's branch progress rows: a request per page, however
        many mirrors there are (:meth:`list_branch_progress` is one per mirror).

        Args:
            organization_id: The organization.
            page_token: ``next_page_token`` of the previous page; None for the first.
            page_size: Rows per page; defaults to ``list_mirrors_page_size``.
        """
        check_key_part(organization_id, "organization_id")
        size = self.page_size if page_size is None else page_size
        check_page_size(size)
        after = decode_page_token(page_token)
        if after is not None:
            try:
                mirror_id, branch = json.loads(after)
            except (ValueError, TypeError):
                raise InvalidMirrorArgumentError(
                    f"invalid page token {page_token!r}") from None
        rows = self._list_all_branches(organization_id,
                                       None if after is None else (mirror_id, branch), size + 1)
        if len(rows) > size:
            last = rows[size - 1]
            return ProgressPage(rows[:size],
                                encode_page_token(json.dumps([last.mirror_id, last.branch])))
        return ProgressPage(rows, None)

    @abstractmethod
    def _list_all_branches(self, organization_id: str, after: tuple[str, str] | None,
                           limit: int) -> list[MirrorBranch]:
        """Up to ``limit`` progress rows after the row of mirror and branch ``after``,
        in the backend's key order."""

    def put_branch_progress(
        self, progress: MirrorBranch, expected_version: int | None = None
    ) -> MirrorBranch:
        """Create or replace a branch progress row, conditional on its version.

        Args:
            progress: The row to store.
            expected_version: The version read; 0 creates the row. Defaults to
                ``progress.version``.

        Returns:
            The stored row with its new version and ``updated_at``.

        Raises:
            MirrorNotFoundError: Creating a row for a missing or deleted mirror.
            VersionConflictError: The row exists (creating) or changed (updating).
            BranchProgressNotFoundError: Updating a row that was removed.
        """
        progress.validate()
        expected = progress.version if expected_version is None else expected_version
        if expected < 0:
            raise InvalidMirrorArgumentError("expected_version cannot be negative")
        new = replace(
            progress, error=clip_error(progress.error), updated_at=self._now(),
            version=expected + 1,
        )
        if expected == 0:
            self._insert_branch(new)
        else:
            self._update_branch(new, expected)
        return new

    @abstractmethod
    def delete_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str, expected_version: int
    ) -> None:
        """Remove a branch progress row (the source branch was deleted).

        Raises:
            BranchProgressNotFoundError: No such row.
            VersionConflictError: The row changed since it was read.
        """

    # --- mirror groups ------------------------------------------------------------------
    def create_group(self, spec: GroupSpec) -> MirrorGroup:
        """Create a mirror group with version 1 and no cut yet.

        Raises:
            GroupExistsError: The id, or the name in the organization, is taken.
            InvalidMirrorArgumentError: A field is bad, or a member appears twice.
        """
        spec.validate()
        now = self._now()
        group = MirrorGroup(
            organization_id=spec.organization_id, id=spec.id, name=spec.name,
            source_region=spec.source_region, destination_region=spec.destination_region,
            members=tuple(spec.members), last_cut=0, heads_read_at=None, created_at=now,
            updated_at=now, version=1)
        self._insert_group(group)
        return group

    @abstractmethod
    def get_group(self, organization_id: str, group_id: str) -> MirrorGroup:
        """Read one group (strongly consistent).

        Raises:
            GroupNotFoundError: No such group.
        """

    @abstractmethod
    def list_groups(self, organization_id: str) -> list[MirrorGroup]:
        """Every group of the organization, ordered by id (oldest first)."""

    def update_group(self, group: MirrorGroup, expected_version: int | None = None
                     ) -> MirrorGroup:
        """Write ``group.members`` and ``group.heads_read_at`` if the row is still at the
        expected version (``last_cut`` moves only with :meth:`add_cut`).

        Raises:
            GroupNotFoundError: The group does not exist.
            VersionConflictError: The row changed since it was read.
        """
        check_key_part(group.organization_id, "organization_id")
        check_key_part(group.id, "group id")
        check_members(group.members)
        expected = group.version if expected_version is None else expected_version
        new = replace(group, updated_at=self._now(), version=expected + 1)
        return self._update_group(new, expected)

    @abstractmethod
    def delete_group(self, organization_id: str, group_id: str,
                     expected_version: int | None = None) -> None:
        """Remove a group with its cuts (its progress row is the destination's to drop).

        Raises:
            GroupNotFoundError: No such group.
            VersionConflictError: ``expected_version`` is given and differs.
        """

    def add_cut(self, group: MirrorGroup, heads: Mapping[GroupMember, str],
                taken_at: datetime, reason: str) -> tuple[MirrorGroup, GroupCut]:
        """Store the group's next cut and move the group's ``last_cut`` to it, in one
        conditional write on the group's version (so cuts are numbered in the order the
        source read them, whichever replica took them). Cuts older than the last
        :data:`~mirrors_db.models.CUTS_KEPT` are dropped.

        Returns:
            The group as stored now, and the cut.

        Raises:
            GroupNotFoundError: The group does not exist.
            VersionConflictError: The group changed since it was read (read the heads
                again, then retry).
            InvalidMirrorArgumentError: A head is not of a member, or is not a commit id.
        """
        for member, commit in heads.items():
            if member not in group.members:
                raise InvalidMirrorArgumentError(
                    f"{member.mirror_id}/{member.branch} is not a member of group {group.id}")
            check_text(commit, "head", 256)
        check_text(reason, "reason", 64)
        cut = GroupCut(group.organization_id, group.id, group.last_cut + 1, dict(heads),
                       taken_at, reason)
        new = replace(group, last_cut=cut.sequence, heads_read_at=taken_at,
                      updated_at=self._now(), version=group.version + 1)
        self._insert_cut(new, group.version, cut)
        return new, cut

    @abstractmethod
    def list_cuts(self, organization_id: str, group_id: str, after: int = 0) -> list[GroupCut]:
        """The group's kept cuts with a sequence number above ``after``, oldest first."""

    @abstractmethod
    def get_group_progress(self, organization_id: str, group_id: str) -> GroupProgress | None:
        """The group's progress in its destination region; None before the first write."""

    def put_group_progress(self, progress: GroupProgress,
                           expected_version: int | None = None) -> GroupProgress:
        """Create (expected version 0) or replace the group's progress row.

        Raises:
            GroupNotFoundError: Creating a row for a missing group.
            VersionConflictError: The row exists (creating), changed or was removed.
        """
        check_key_part(progress.organization_id, "organization_id")
        check_key_part(progress.group_id, "group id")
        expected = progress.version if expected_version is None else expected_version
        if expected < 0:
            raise InvalidMirrorArgumentError("expected_version cannot be negative")
        new = replace(progress, error=clip_error(progress.error),
                      waiting_for=clip_error(progress.waiting_for), updated_at=self._now(),
                      version=expected + 1)
        self._put_group_progress(new, expected)
        return new

    @abstractmethod
    def delete_group_progress(self, organization_id: str, group_id: str,
                              expected_version: int) -> None:
        """Remove the group's progress row (the group was deleted).

        Raises:
            VersionConflictError: The row changed or is gone.
        """

    # --- sensor readings -----------------------------------------------------------
    def put_sensor_reading(self, reading: SensorReading) -> bool:
        """Store a page of a sensor's reading, unless a reading of that page at the same
        time or later is stored already (another replica's sensor was faster).

        Returns:
            Whether it was stored.
        """
        reading.validate()
        return self._put_sensor_reading(reading)

    @abstractmethod
    def list_sensor_readings(self, organization_id: str,
                             destination_region: str | None = None) -> list[SensorReading]:
        """Every stored page of the sensors' readings (of one destination region's, if
        given): a request or a few whatever the number of mirrors."""

    @abstractmethod
    def _put_sensor_reading(self, reading: SensorReading) -> bool:
        """Insert or replace the page if the stored one was read earlier."""

    # --- leases ----------------------------------------------------------------------
    def acquire_lease(
        self, organization_id: str, name: str, owner: str, ttl: timedelta | float
    ) -> Lease:
        """Take the lease ``name`` for ``ttl`` if it is free, expired, or ours already.

        Raises:
            LeaseHeldError: Another owner holds it and it has not expired.
        """
        check_key_part(organization_id, "organization_id")
        check_text(name, "lease name", 256)
        check_text(owner, "lease owner", 256)
        now = self._now()
        return self._acquire_lease(organization_id, name, owner, now, now + _ttl(ttl))

    def renew_lease(self, lease: Lease, ttl: timedelta | float) -> Lease:
        """Extend a lease we hold by ``ttl`` from now.

        Succeeds even after expiry as long as nobody took the lease meanwhile.

        Raises:
            LeaseLostError: The lease was released or taken over.
        """
        return self._renew_lease(lease, self._now() + _ttl(ttl))

    @abstractmethod
    def release_lease(self, lease: Lease) -> bool:
        """Give a lease back. Returns False if it was no longer ours (nothing done)."""

    @abstractmethod
    def get_lease(self, organization_id: str, name: str) -> Lease | None:
        """The lease row, expired or not; None if there is none."""

    # --- change feed -------------------------------------------------------------------
    @abstractmethod
    def watch(
        self,
        organization_id: str | None = None,
        kinds: frozenset[RowKind] = ALL_KINDS,
        poll_interval: float | None = None,
    ) -> ChangeFeed:
        """Follow changes made after this call returns.

        The feed is a wake-up signal: each backend delivers every change it
        sees in commit order per row, but a feed can miss changes while its
        connection is down, so consumers keep a periodic full scan as the fallback.

        Args:
            organization_id: Only this organization's rows (default: all).
            kinds: Only these row kinds (default: all).
            poll_interval: Seconds between polls for the polling backends.
        """

    # --- lifecycle ------------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None:
        """Release connections. The table cannot be used afterwards."""

    def __enter__(self) -> MirrorsTable:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- backend hooks ---------------------------------------------------------------------
    @abstractmethod
    def _insert_mirror(self, mirror: Mirror) -> None:
        """Store a new mirror; raise MirrorExistsError on any uniqueness clash."""

    @abstractmethod
    def _import_mirrors(self, mirrors: Sequence[Mirror]) -> None:
        """Store complete rows in bulk (already checked against each other)."""

    @abstractmethod
    def _list_mirrors(self, where: MirrorFilter, after_id: str | None, limit: int) -> list[Mirror]:
        """Up to ``limit`` mirrors matching ``where`` with id > ``after_id``, by id."""

    @abstractmethod
    def _update_mirror(
        self, new: Mirror, expected_version: int, from_states: frozenset[MirrorState]
    ) -> Mirror:
        """Write state/error/updated_at/version if version == expected and the stored
        state is in ``from_states``; on failure raise the error that explains it."""

    @abstractmethod
    def _insert_branch(self, progress: MirrorBranch) -> None:
        """Create a branch row (version 1) if absent and the mirror is live."""

    @abstractmethod
    def _update_branch(self, progress: MirrorBranch, expected_version: int) -> None:
        """Replace a branch row if its version is ``expected_version``."""

    @abstractmethod
    def _acquire_lease(
        self, organization_id: str, name: str, owner: str, now: datetime, expires_at: datetime
    ) -> Lease:
        """Insert or take over the lease if absent, expired at ``now``, or held by owner."""

    @abstractmethod
    def _renew_lease(self, lease: Lease, expires_at: datetime) -> Lease:
        """Move expiry if owner and version still match; else raise LeaseLostError."""

    @abstractmethod
    def _insert_group(self, group: MirrorGroup) -> None:
        """Store a new group; raise GroupExistsError if its id or name is taken."""

    @abstractmethod
    def _update_group(self, new: MirrorGroup, expected_version: int) -> MirrorGroup:
        """Write members/heads_read_at/updated_at/version if version == expected."""

    @abstractmethod
    def _insert_cut(self, group: MirrorGroup, expected_version: int, cut: GroupCut) -> None:
        """Write ``group`` (last_cut, heads_read_at, updated_at, version) if its version is
        ``expected_version``, insert ``cut`` and drop the cut CUTS_KEPT before it, at once."""

    @abstractmethod
    def _put_group_progress(self, progress: GroupProgress, expected_version: int) -> None:
        """Insert (expected 0, the group must exist) or replace the progress row."""

    # --- helpers ------------------------------------------------------------------------------
    def _now(self) -> datetime:
        now = self.clock()
        if now.tzinfo is None:
            raise InvalidMirrorArgumentError("the clock must return timezone-aware datetimes")
        return now

    def _page(self, where: MirrorFilter, token: str | None, page_size: int | None) -> MirrorPage:
        check_key_part(where.organization_id, "organization_id")
        size = self.page_size if page_size is None else page_size
        check_page_size(size)
        rows = self._list_mirrors(where, decode_page_token(token), size + 1)
        if len(rows) > size:
            return MirrorPage(rows[:size], encode_page_token(rows[size - 1].id))
        return MirrorPage(rows, None)


def _ttl(ttl: timedelta | float) -> timedelta:
    delta = ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl)
    if delta <= timedelta(0):
        raise InvalidMirrorArgumentError(f"lease ttl must be positive, got {ttl!r}")
    return delta


class ChangeFeed(ABC):
    """A stream of ChangeEvents filled by a background thread.

    Iterate it (``for event in feed``), poll it (``feed.get(timeout)``) or iterate
    it asynchronously (``async for event in feed``). ``close()`` stops it from any
    thread; iteration then ends. Also a context manager.
    """

    _STOP = object()

    def __init__(self, organization_id: str | None, kinds: frozenset[RowKind]) -> None:
        self._organization_id = organization_id
        self._kinds = kinds
        self._queue: queue.Queue[object] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- consumer side -------------------------------------------------------------
    def get(self, timeout: float | None = None) -> ChangeEvent | None:
        """The next event, waiting up to ``timeout`` seconds (forever if None).

        Returns None on timeout or once the feed is closed and drained.
        """
        if self._stop.is_set() and self._queue.empty():
            return None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is ChangeFeed._STOP:
            self._queue.put(item)  # wake any other waiting consumer too
            return None
        assert isinstance(item, ChangeEvent)
        return item

    def __iter__(self) -> Iterator[ChangeEvent]:
        while True:
            event = self.get()
            if event is None:
                return
            yield event

    async def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        while not (self._stop.is_set() and self._queue.empty()):
            event = await asyncio.to_thread(self.get, 0.5)
            if event is not None:
                yield event

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._stop.is_set()

    def close(self) -> None:
        """Stop following changes; pending events can still be read."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._queue.put(ChangeFeed._STOP)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def __enter__(self) -> ChangeFeed:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- producer side ----------------------------------------------------------------
    def _start(self, name: str) -> None:
        """Start the producer thread; call once the subscription is in place."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _emit(self, event: ChangeEvent) -> None:
        if event.kind not in self._kinds:
            return
        if self._organization_id is not None and event.organization_id != self._organization_id:
            return
        self._queue.put(event)

    def _run(self) -> None:
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    self._poll()
                    failures = 0
                except Exception:  # keep following; the feed is only a wake-up signal
                    failures += 1
                    log.warning("mirrors table change feed failed; retrying", exc_info=True)
                    if self._stop.wait(min(5.0, 0.1 * 2**failures)):
                        break
                    try:
                        self._recover()
                    except Exception:
                        log.warning("mirrors table change feed cannot recover yet", exc_info=True)
        finally:
            self._shutdown()

    @abstractmethod
    def _poll(self) -> None:
        """Wait briefly for changes and _emit them; return soon after stop is set."""

    def _recover(self) -> None:  # noqa: B027 - optional hook
        """Re-establish the subscription after _poll failed (default: nothing)."""

    def _shutdown(self) -> None:  # noqa: B027 - optional hook
        """Release the feed's connections (runs on the producer thread)."""
