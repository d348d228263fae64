"""Following one mirror: sense source heads, validate, copy (builtin), promote.

This runs in the destination region, under the mirror's lease. For every branch
(and tag) of the source repository it compares the source head with the mirror's
head; for a new source head it fetches the new commit records through the source
API, proves the commit present in the destination namespace (see
:mod:`lakefs_core.graveler.presence`), and only then writes the commit records and
moves the mirror ref by compare-and-swap.

Invariants kept here (docs/ARCHITECTURE.md, "Invariants"):
- I1: a mirror ref only ever points at a commit its source ref pointed at, and only
  once that commit was proven present (``mark_present`` precedes the move).
- I3: a mirror branch moves to what its source branch points at now; it moves to a
  non-descendant only if the source branch itself was reset.
- I5: all state that matters is in the refstore and the mirrors table; the
  in-memory state below is a cache that a restarted sidecar rebuilds.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from lakefs_core.errors import (
    BranchChangedError,
    CommitNotFoundError,
    LakeFSError,
    ValidationError,
)
from lakefs_core.graveler.mirror import MirrorService
from lakefs_core.graveler.model import AddressType, CommitRecord
from lakefs_core.graveler.presence import (
    DEFAULT_CONCURRENCY,
    CommitValidator,
    CountingStore,
    MissingItem,
    MissingKind,
)
from lakefs_core.graveler.ranges import RangeCache
from mirrors_db.errors import (
    BranchProgressNotFoundError,
    MirrorsDatabaseError,
    VersionConflictError,
)
from mirrors_db.models import SENSOR_READING_BRANCHES, Mirror, MirrorBranch
from mirrors_db.table import MirrorsTable
from replication.copier import BuiltinCopier, CopySource
from replication.metrics import ReplicationMetrics
from replication.progress_cache import ProgressCache
from replication.source import SourceClient, SourceError, SourceForbiddenError

log = logging.getLogger("replication.mirroring")

TAG_PREFIX = "tag:"  # refs of kind tag are tracked in memory under this prefix
#: how a mirror's error starts when its last round could not read the source's heads
SOURCE_UNREADABLE = "source unreadable: "
#: seconds between two writes of a branch's source_seen_at / source_confirmed_at when
#: nothing else of its row changes: the stored times are at most this much older than
#: the truth, so the lag read from them errs on the high side, never the low
CONFIRMATION_REFRESH = 5.0


@dataclass
class RefProgress:
    """In-memory progress of one ref towards one source head."""

    target: str
    seen_at: float
    commits: list[CommitRecord] | None = None
    #: the last time the source's ref was read and found at ``target``: what promoting
    #: it confirms (a recheck round reads nothing of the source)
    read_at: datetime | None = None
    #: the pieces the last validation found missing, narrowed by rechecks
    missing: list[MissingItem] = field(default_factory=list)
    #: set when the last validation found pieces missing or failed: the head is
    #: validated again at the first validation run from then on (its cooldown)
    retry_at: float | None = None
    #: when the missing pieces are rechecked next (``recheck_interval``)
    next_recheck: float = 0.0
    #: older heads of the branch still waiting for pieces, oldest first (at most
    #: :data:`EARLIER_HEADS`): the mirror moves to one of them when it is complete
    #: before ``target`` is, so a branch that moves faster than its objects arrive
    #: still advances
    earlier: list[RefProgress] = field(default_factory=list)

    @property
    def waiting_since(self) -> float:
        """When the oldest head the mirror has not reached yet was seen."""
        return min([self.seen_at, *(e.seen_at for e in self.earlier)])


#: older heads of a branch kept waiting beside its newest, the oldest first (each costs a
#: recheck request per ``recheck_interval`` at most)
EARLIER_HEADS = 4


@dataclass
class MirrorContext:
    """What processing a mirror needs from the sidecar.

    The validation schedule (seconds on the monotonic clock): a new source head is
    validated as soon as it is seen. A head whose validation found pieces missing is
    validated again after ``cooldown_on_missing``, one whose validation failed after
    ``cooldown_on_error``, each at the first validation run from then on; runs are
    every ``run_interval`` from ``runs_from``. Meanwhile the pieces found missing are
    rechecked every ``recheck_interval`` (0: never), and once all of them have
    arrived the head is validated at once.
    """

    organization_id: str
    table: MirrorsTable
    mirrors: MirrorService
    metrics: ReplicationMetrics
    source_client: Callable[[str], SourceClient]
    copy_source_store: Callable[[Mirror], CopySource | None]
    store_for: Callable[[str], CountingStore]
    builtin: BuiltinCopier | None
    branch_page_size: int = 1000
    log_page_size: int = 1000
    run_interval: float = 60.0
    runs_from: float = field(default_factory=time.monotonic)
    cooldown_on_missing: float = 60.0
    cooldown_on_error: float = 60.0
    recheck_interval: float = 0.5
    #: held while reading a source's branches, tags and commit log
    scan_slots: AbstractContextManager[object] = field(default_factory=contextlib.nullcontext)
    #: held while validating (reading, and for ``builtin`` filling, the destination)
    validation_slots: AbstractContextManager[object] = field(
        default_factory=contextlib.nullcontext)
    mirror_tags: bool = True
    #: seconds before asking again for the tags the replication user may not list (the
    #: sensor's period: not at every round an event or a recheck brings)
    tags_retry: float = 60.0
    #: store requests one validation makes at once
    validation_concurrency: int = DEFAULT_CONCURRENCY
    #: the parsed ranges every mirror's validator keeps, under one bound
    range_cache: RangeCache = field(default_factory=RangeCache)
    #: the branches of a mirror (by id) that a mirror group moves: its follower leaves
    #: them alone (:mod:`replication.groups` moves them, a cut at a time)
    grouped: Callable[[str], frozenset[str]] = field(default=lambda _mirror_id: frozenset())
    #: a branch's rows as stored (mirror id -> rows), with what the sensors' readings
    #: confirm of them (:class:`~mirrors_db.models.SensorReading`)
    stored_progress: Callable[[str], list[MirrorBranch]] | None = None
    #: the progress rows as the change feed keeps them (None: read from the table)
    progress: ProgressCache | None = None

    def validation_run_at(self, t: float) -> float:
        """The first validation run at or after ``t``."""
        runs = max(0, math.ceil((t - self.runs_from) / self.run_interval))
        return self.runs_from + runs * self.run_interval


class MirrorFollower:
    """Follows one mirror. Not thread-safe: one worker at a time per mirror."""

    def __init__(self, ctx: MirrorContext, mirror: Mirror, *, track_lag: bool = True) -> None:
        """``track_lag`` false: a follower used only to validate (a group's), which
        leaves the mirror's lag gauges to its own follower."""
        self.ctx = ctx
        self.mirror = mirror
        #: the store of the mirror repository (its storage id in this region)
        self.store = ctx.store_for(mirror.storage_id)
        self.validator = CommitValidator(self.store, mirror.storage_namespace,
                                         concurrency=ctx.validation_concurrency,
                                         range_cache=ctx.range_cache,
                                         request_times=self.store.times)
        self.refs: dict[str, RefProgress] = {}
        #: what keeps the mirror from following all of its source, for its status
        #: (e.g. tags the replication user may not list); "" when nothing does
        self.notice = ""
        #: permissions the replication user lacks, already logged
        self._warned: set[str] = set()
        #: the branches' progress rows as last read or written (a recheck round writes
        #: over them without reading the table again)
        self._rows: dict[str, MirrorBranch] = {}
        #: while the replication user may not list tags: why (for the status), and when
        #: (monotonic) to try again; a refused listing is not repeated every round
        self._tags_refused = ""
        self._tags_retry_at = 0.0
        #: per branch, the time (Unix) from which its lag counts: the last time the
        #: source's head was read and found equal to the mirror's (the stored one at
        #: first, so a restarted sidecar starts from it), or, never confirmed, when the
        #: branch was first seen; the lag gauge reads it at every scrape
        self._lag_from: dict[str, float] = {}
        stored = ctx.stored_progress or (
            lambda mirror_id: ctx.table.list_branch_progress(ctx.organization_id, mirror_id))
        try:
            rows = stored(mirror.id) if track_lag else []
        except MirrorsDatabaseError:
            rows = []
        for row in rows:
            since = row.source_confirmed_at or row.source_head_seen_at
            if since is not None:
                self._watch_lag(row.branch, since.timestamp())

    # ------------------------------------------------------------------ the round
    def process(self, *, sense: bool = True) -> float | None:
        """One round. Returns when (monotonic) it wants to run again.

        ``sense``: a full round, over every ref of the source (read again) and the
        mirror. Otherwise a recheck round: only the heads already being validated, and
        of those only what was missing (no source request, no listing of refs, no read
        of the mirrors table). None means "nothing pending": the next sensor tick or
        event will do.
        """
        when = self._round() if sense else self._recheck_round()
        if not self.notice:
            self._warned.clear()  # nothing is refused any more
        if not self.refs:
            # every ref is at its source head: what the validator proved is covered by
            # those heads, which the next validations start from (their base)
            self.validator.forget_proven()
        return when

    def _round(self) -> float | None:
        m = self.mirror
        client = self.ctx.source_client(m.source_region)
        repo = m.name
        try:
            with self.ctx.scan_slots:
                branches = client.list_branches(m.source_repository,
                                                self.ctx.branch_page_size)
        except SourceError as e:
            # blind: the lag gauges go on growing from the last confirmation
            if isinstance(e, SourceForbiddenError):
                self._forbidden(e)
            raise SourceUnreadableError(f"{SOURCE_UNREADABLE}{e}") from e
        read_at = _utcnow()
        grouped = self.ctx.grouped(m.id)  # a group moves these, with its other members
        source_branches = {r.name: r.commit_id for r in branches if r.name not in grouped}
        mirror_branches = {name: head for name, head in self.ctx.mirrors.branches(repo).items()
                           if name not in grouped}
        rows = (self.ctx.table.list_branch_progress(self.ctx.organization_id, m.id)
                if self.ctx.progress is None else self.ctx.progress.rows(m.id))
        self._rows = {p.branch: p for p in rows}
        progress = {p.branch: p for p in rows if p.branch not in grouped}
        due: list[float] = []
        notices: list[str] = []
        for name, head in source_branches.items():
            try:
                when = self._follow(client, name, head, mirror_branches.get(name) or None,
                                    progress.get(name), is_tag=False, read_at=read_at)
            except SourceForbiddenError as e:
                # this branch waits for a permission; the others go on
                self._forbidden(e)
                row = self._current_row(name)
                self._record(row, name, source_head=head, error=f"permission denied: {e}",
                             source_seen_at=_refreshed(row.source_seen_at if row else None,
                                                       read_at))
                notices.append(f"branch {name!r}: {e.request} needs {e.action}")
                continue
            if when is not None:
                due.append(when)
        for name in set(mirror_branches) - set(source_branches):
            self._source_ref_deleted(name, progress.get(name), is_tag=False)
        for name in set(progress) - set(source_branches) - set(mirror_branches):
            self._drop_progress(progress[name])
        # a head that was still pending when its branch went away
        for name in {k for k in self.refs if not k.startswith(TAG_PREFIX)} - set(source_branches):
            self._forget_ref(name)
        if self.ctx.mirror_tags and time.monotonic() < self._tags_retry_at:
            notices.append(self._tags_refused)  # refused lately: asked again later
        elif self.ctx.mirror_tags:
            try:
                with self.ctx.scan_slots:
                    tags = client.list_tags(m.source_repository, self.ctx.branch_page_size)
            except SourceForbiddenError as e:
                self._forbidden(e)
                self._tags_refused = (f"tags are not mirrored: the replication user may not "
                                      f"list them; add {e.action} to its policy")
                self._tags_retry_at = time.monotonic() + self.ctx.tags_retry
                notices.append(self._tags_refused)
                self.notice = "; ".join(notices)
                return min(due) if due else None
            self._tags_refused = ""
            source_tags = {r.name: r.commit_id for r in tags}
            mirror_tags = self.ctx.mirrors.tags(repo)
            for name, head in source_tags.items():
                try:
                    when = self._follow(client, name, head, mirror_tags.get(name), None,
                                        is_tag=True)
                except SourceForbiddenError as e:
                    self._forbidden(e)
                    notices.append(f"tag {name!r}: {e.request} needs {e.action}")
                    continue
                if when is not None:
                    due.append(when)
            for name in set(mirror_tags) - set(source_tags):
                self._source_ref_deleted(name, None, is_tag=True)
            for key in {k for k in self.refs if k.startswith(TAG_PREFIX)}:
                if key.removeprefix(TAG_PREFIX) not in source_tags:
                    self.refs.pop(key, None)
        self.notice = "; ".join(notices)
        return min(due) if due else None

    def _recheck_round(self) -> float | None:
        """Look again at the heads being validated, at what they missed only."""
        if not self.refs:
            return None
        client = self.ctx.source_client(self.mirror.source_region)  # sends nothing here
        repo = self.mirror.name
        keys = list(self.refs)
        branches = (self.ctx.mirrors.branches(repo)
                    if any(not k.startswith(TAG_PREFIX) for k in keys) else {})
        tags = (self.ctx.mirrors.tags(repo)
                if any(k.startswith(TAG_PREFIX) for k in keys) else {})
        grouped = self.ctx.grouped(self.mirror.id)  # moved by their group, if any now
        due: list[float] = []
        for key in keys:
            st = self.refs.get(key)
            if st is None or st.read_at is None or key in grouped:
                continue
            is_tag = key.startswith(TAG_PREFIX)
            name = key.removeprefix(TAG_PREFIX)
            mirror_head = (tags if is_tag else branches).get(name) or None
            if mirror_head == st.target:
                continue  # moved meanwhile (another replica): the next full round confirms
            try:
                when = self._follow(client, name, st.target, mirror_head,
                                    None if is_tag else self._rows.get(name), is_tag=is_tag,
                                    read_at=st.read_at, sensed=False)
            except SourceForbiddenError as e:  # the copier's: the next full round reports it
                self._forbidden(e)
                continue
            if when is not None:
                due.append(when)
        return min(due) if due else None

    def quiet(self, source: dict[str, str], source_tags: dict[str, str] | None,
              read_at: datetime) -> tuple[str, ...] | None:
        """Whether the mirror serves all of its source as read (by someone else: the
        sensor) at ``read_at``: every branch (and tag, if given) at its source head,
        nothing pending. If not, None, and nothing is changed (a round is due).

        If so, the branches the sensor's reading confirms (:class:`SensorReading`, one
        row for many mirrors). A branch whose row does not already say it serves that
        head, with nothing pending, has its row written as a round would; the others'
        rows are left alone, and :meth:`confirmed_by_reading` follows once the reading
        is stored.
        """
        grouped = self.ctx.grouped(self.mirror.id)
        source = {n: h for n, h in source.items() if n not in grouped}
        repo = self.mirror.name
        if self.refs or source != {n: h for n, h in self.ctx.mirrors.branches(repo).items()
                                   if n not in grouped}:
            return None
        if self.ctx.mirror_tags and source_tags is not None and (
                self._tags_refused or source_tags != self.ctx.mirrors.tags(repo)):
            return None  # tags moved, or may be listed again: a round follows them
        # a mirror of more branches than a reading's page holds is confirmed in its rows
        listed = len(source) <= SENSOR_READING_BRANCHES
        for name, head in source.items():
            row = self._rows.get(name) or self._current_row(name)
            since = row and (row.source_confirmed_at or row.source_head_seen_at)
            self._watch_lag(name, (since or read_at).timestamp(), keep=True)
            if listed and row is not None and row.version and row == replace(
                    row, **self._head_state(head)):
                continue  # its row says so already: the reading confirms it
            if self._at_head(name, head, row, read_at) is None:  # written meanwhile
                self._at_head(name, head, self._current_row(name), read_at)
        return tuple(sorted(source)) if listed else ()

    def confirmed_by_reading(self, branches: Iterable[str], read_at: datetime) -> None:
        """The sensor's reading at ``read_at``, stored, confirms these branches."""
        for name in branches:
            self._confirmed(name, read_at)
            self.ctx.metrics.pending_commits.labels(self.mirror.name, name).set(0)
            self.ctx.metrics.missing_objects.labels(self.mirror.name, name).set(0)

    @staticmethod
    def _head_state(head: str) -> dict[str, Any]:
        """A progress row's fields when the mirror branch serves the source's ``head``."""
        return {"source_head": head, "pending_commit": None, "promoted_commit": head,
                "missing_ranges": 0, "missing_objects": 0, "error": ""}

    def _at_head(self, name: str, head: str, row: MirrorBranch | None,
                 read_at: datetime) -> MirrorBranch | None:
        """The branch serves ``head``, its source's head as read at ``read_at``: it is
        confirmed then. Returns its row as stored now (None if it was not written)."""
        self._confirmed(name, read_at)
        self.ctx.metrics.pending_commits.labels(self.mirror.name, name).set(0)
        self.ctx.metrics.missing_objects.labels(self.mirror.name, name).set(0)
        return self._record(row, name, **self._head_state(head),
                            **self._seen(row, read_at, confirmed=True))

    def _current_row(self, branch: str) -> MirrorBranch | None:
        """The branch's progress row as stored now, or as the change feed keeps it (None
        if there is none, or on error)."""
        try:
            if self.ctx.progress is not None and self.ctx.progress.feed_open:
                return next((p for p in self.ctx.progress.rows(self.mirror.id)
                             if p.branch == branch), None)
            return self.ctx.table.get_branch_progress(self.ctx.organization_id,
                                                      self.mirror.id, branch)
        except MirrorsDatabaseError:  # not found, or unreachable: best effort
            return None

    def _forbidden(self, error: SourceForbiddenError) -> None:
        self.ctx.metrics.permission_errors.labels(self.mirror.name, error.action).inc()
        # a missing permission stays missing round after round: said once (the status
        # and the metric keep saying it), again once it was granted and is missing anew
        warned = error.action in self._warned
        self._warned.add(error.action)
        log.log(logging.DEBUG if warned else logging.WARNING, "mirror %s: %s",
                self.mirror.id, error, extra={"mirror": self.mirror.id,
                                              "request": error.request,
                                              "action": error.action})

    # ------------------------------------------------------------------- one ref
    def _follow(self, client: SourceClient, name: str, head: str, mirror_head: str | None,
                row: MirrorBranch | None, *, is_tag: bool,
                read_at: datetime | None = None, sensed: bool = True) -> float | None:
        """Bring one ref towards ``head``, its source's head as read at ``read_at``
        (``sensed`` false: read in an earlier round, not this one)."""
        key = TAG_PREFIX + name if is_tag else name
        labels = (self.mirror.name, key)
        read_at = read_at or _utcnow()
        if not is_tag:
            since = row and (row.source_confirmed_at or row.source_head_seen_at)
            self._watch_lag(name, (since or read_at).timestamp(), keep=True)
        if head == mirror_head:
            self.refs.pop(key, None)
            if not is_tag:
                self._at_head(name, head, row, read_at)
            return None
        now = time.monotonic()
        st = self.refs.get(key)
        if st is None or st.target != head:
            # a new head is validated at once; the one it replaces may go on waiting
            st = self._new_head(st, head, now, is_tag=is_tag)
            self.refs[key] = st
            if not is_tag:
                seen = row.source_head_seen_at if row and row.source_head == head else None
                row = self._record(row, name, source_head=head, pending_commit=head,
                                   source_head_seen_at=seen or _utcnow(), error="",
                                   **self._seen(row, read_at))
        if sensed:
            st.read_at = read_at
        run_due = recheck_due = False
        if st.retry_at is not None:  # waiting: pieces were missing, or validation failed
            run_due = now >= self.ctx.validation_run_at(st.retry_at)
            recheck_due = self._rechecking(st) and now >= st.next_recheck
            if not (run_due or recheck_due):
                if st.earlier and now >= st.earlier[-1].next_recheck:
                    mirror_head, row = self._try_earlier(st, name, mirror_head, row)
                if not is_tag and sensed:
                    row = self._record(row, name, **self._seen(row, read_at))
                return self._next_visit(st)
        repo = self.mirror.name
        mirrors = self.ctx.mirrors
        if st.commits is None:
            earlier = {r.id for e in st.earlier for r in e.commits or ()}
            with self.ctx.scan_slots:
                new = client.new_commits(
                    self.mirror.source_repository, head,
                    known=lambda c: c in earlier or mirrors.has_commit(repo, c),
                    page_size=self.ctx.log_page_size)
            if st.earlier and not any(st.earlier[-1].target in r.commit.parents for r in new):
                st.earlier = []  # the source was reset: those heads are history now
            # the records up to the newest earlier head (not written yet), then the new ones
            st.commits = [*(st.earlier[-1].commits or () if st.earlier else ()), *new]
        target = st.commits[-1] if st.commits else CommitRecord(
            head, mirrors.get_commit(repo, head))
        if target.id != head:
            raise SourceError(f"source log did not start at {head}")
        if st.earlier:
            mirror_head, row = self._try_earlier(st, name, mirror_head, row)
        if not is_tag:
            self.ctx.metrics.pending_commits.labels(*labels).set(len(st.commits))
        if not mirrors.is_present(repo, head):
            try:
                with self.ctx.validation_slots, self._counting_requests():
                    missing: list[MissingItem] = []
                    if recheck_due and not run_due:
                        # cheap: only what was missing; all arrived -> validate at once
                        missing = self._recheck(st.missing, target)
                    validated = not missing
                    if validated:
                        missing = self._validate(target, mirror_head)
            except SourceError:
                raise  # the source's part: the round fails, as when sensing
            except (LakeFSError, OSError) as e:
                return self._validation_failed(st, name, row, e, is_tag=is_tag)
            if missing:
                return self._waiting(st, name, row, missing, validated=validated,
                                     is_tag=is_tag)
        self._promote(st, name, mirror_head, is_tag=is_tag)
        self.refs.pop(key, None)
        if not is_tag:
            # the mirror now serves the head the source had when it was read
            self._confirmed(name, read_at)
            self.ctx.metrics.pending_commits.labels(*labels).set(0)
            self.ctx.metrics.missing_objects.labels(*labels).set(0)
            self._record(row, name, source_head=head, pending_commit=None,
                         promoted_commit=head, promoted_at=_utcnow(), missing_ranges=0,
                         missing_objects=0, error="",
                         **self._seen(row, read_at, confirmed=True, now=True))
        return None

    def _new_head(self, st: RefProgress | None, head: str, now: float, *,
                  is_tag: bool) -> RefProgress:
        """The progress towards a new source head of a branch.

        The head it replaces stays among the earlier heads if it was waiting for
        pieces (validated, some missing): it may be complete before the new one is.
        A head the branch comes back to is taken up where it was.
        """
        earlier: list[RefProgress] = []
        if st is not None and not is_tag:
            earlier = [*st.earlier, replace(st, earlier=[])]
            earlier = [e for e in earlier if e.commits is not None and e.missing]
            for i, e in enumerate(earlier):
                if e.target == head:  # back to an earlier head (the source was reset)
                    return replace(e, earlier=earlier[:i])
        # the oldest are kept: their pieces were sent first, so they are complete first
        # (replication that falls behind still lets the branch advance)
        return RefProgress(target=head, seen_at=now, earlier=earlier[:EARLIER_HEADS])

    def _try_earlier(self, st: RefProgress, name: str, mirror_head: str | None,
                     row: MirrorBranch | None) -> tuple[str | None, MirrorBranch | None]:
        """Move the mirror branch to the newest earlier head whose pieces have all arrived.

        Each earlier head is an ancestor of the branch's head (checked when the head's
        commits were read), so the branch moves forward, to a commit its source pointed
        at (I1, I3). Returns the mirror head and the progress row as they are now.
        """
        now = time.monotonic()
        for i in range(len(st.earlier) - 1, -1, -1):
            e = st.earlier[i]
            if now < e.next_recheck:
                continue
            e.next_recheck = now + self.ctx.recheck_interval
            target = CommitRecord(e.target, (e.commits or [])[-1].commit)
            try:
                with self.ctx.validation_slots, self._counting_requests():
                    e.missing = self._recheck(e.missing, target)
                    if e.missing:
                        continue
                    e.missing = self._validate(target, mirror_head)
            except (LakeFSError, OSError) as error:
                log.debug("mirror %s: earlier head %s not checked: %s", self.mirror.id,
                          e.target, error)
                continue
            if e.missing:
                continue
            self._promote(e, name, mirror_head, is_tag=False)
            written = {r.id for older in st.earlier[:i + 1] for r in older.commits or ()}
            st.commits = [r for r in st.commits or () if r.id not in written]
            st.earlier = st.earlier[i + 1:]
            row = self._record(row, name, promoted_commit=e.target, promoted_at=_utcnow())
            return e.target, row
        return mirror_head, row

    # ---------------------------------------------------------------- validation
    def prove(self, target: CommitRecord) -> list[MissingItem]:
        """Validate one commit against the destination (``builtin`` copies what is
        missing first); the pieces still missing. Moves nothing."""
        with self.ctx.validation_slots, self._counting_requests():
            return self._validate(target, None)

    def recheck(self, missing: list[MissingItem], target: CommitRecord) -> list[MissingItem]:
        """The pieces of ``missing`` (of ``target``) still missing, looked at again
        (``builtin`` copies them first). Moves nothing."""
        with self.ctx.validation_slots, self._counting_requests():
            return self._recheck(missing, target)

    def _rechecking(self, st: RefProgress) -> bool:
        return self.ctx.recheck_interval > 0 and bool(st.missing)

    def _next_visit(self, st: RefProgress) -> float:
        """When a waiting ref wants a look again: its next validation or recheck (its
        own or an earlier head's)."""
        assert st.retry_at is not None
        at = self.ctx.validation_run_at(st.retry_at)
        if self._rechecking(st):
            at = min(at, st.next_recheck)
        if st.earlier and self.ctx.recheck_interval > 0:
            at = min(at, min(e.next_recheck for e in st.earlier))
        return at

    def _waiting(self, st: RefProgress, name: str, row: MirrorBranch | None,
                 missing: list[MissingItem], *, validated: bool, is_tag: bool) -> float:
        """Pieces are missing: validate again ``cooldown_on_missing`` after the last
        validation (a recheck is no validation and leaves the cooldown as it was)."""
        now = time.monotonic()
        if validated:
            st.retry_at = now + self.ctx.cooldown_on_missing
        st.missing = missing
        st.next_recheck = now + self.ctx.recheck_interval
        n_obj = sum(1 for i in missing if i.kind is MissingKind.OBJECT)
        if not is_tag:
            self.ctx.metrics.missing_objects.labels(self.mirror.name, name).set(n_obj)
            self._record(row, name, missing_ranges=len(missing) - n_obj,
                         missing_objects=n_obj, error="")
        return self._next_visit(st)

    def _validation_failed(self, st: RefProgress, name: str, row: MirrorBranch | None,
                           error: Exception, *, is_tag: bool) -> float:
        """Validate again from scratch after ``cooldown_on_error``."""
        st.retry_at = time.monotonic() + self.ctx.cooldown_on_error
        st.missing = []
        self.ctx.metrics.errors.labels(self.mirror.name).inc()
        log.warning("mirror %s: validation of %s failed: %s", self.mirror.id, st.target, error,
                    extra={"mirror": self.mirror.id, "ref": name, "commit": st.target})
        if not is_tag:
            self._record(row, name, error=f"validation failed: {error}")
        return self._next_visit(st)

    @contextlib.contextmanager
    def _counting_requests(self) -> Iterator[None]:
        before = self.store.requests
        try:
            yield
        finally:
            self.ctx.metrics.validation_requests.labels(self.mirror.name).inc(
                self.store.requests - before)

    def _recheck(self, missing: list[MissingItem], target: CommitRecord) -> list[MissingItem]:
        """The pieces of ``missing`` still missing (in order, from the first still missing;
        ``builtin`` copies them first)."""
        missing = self.validator.recheck(missing)
        if missing and self.ctx.builtin is not None:
            self._copy(missing, target)
            missing = self.validator.recheck(missing)
        return missing

    def _validate(self, target: CommitRecord, mirror_head: str | None) -> list[MissingItem]:
        """Validate the commit against the destination; what it still misses."""
        base = self._base_metarange(mirror_head)
        result = self.validator.validate(target.commit.metarange_id, base)
        rounds = 0
        while result.missing and self.ctx.builtin is not None and rounds < 3:
            # ranges first, then the objects they list: a few rounds at most
            self._copy(result.missing, target)
            result = self.validator.validate(target.commit.metarange_id, base)
            rounds += 1
        return result.missing

    def _copy(self, missing: list[MissingItem], target: CommitRecord) -> None:
        if self.ctx.builtin is None:
            return
        source = self.ctx.copy_source_store(self.mirror)
        if source is None:
            source = CopySource(self.mirror.source_repository, target.id,
                                self.ctx.source_client(self.mirror.source_region))
        else:
            source = replace(source, commit_id=target.id)
        # An imported object keeps its absolute address, outside the mirror's namespace:
        # the copier may put it there when nothing is there, never over another object
        # (the destination's own data at that address); such a commit waits, reported.
        missing = [m for m in missing if not _foreign_object(m)]
        report = self.ctx.builtin.copy(source, self.store.inner, missing)
        self.ctx.metrics.copied_objects.labels(self.mirror.name).inc(report.copied)
        if report.denied is not None:
            # the copier may not read what the mirror needs: the branch reports it
            # (status, permission metric) like any refused source request
            raise report.denied

    def _base_metarange(self, mirror_head: str | None) -> str | None:
        """A metarange proven present in the destination, close to the target."""
        mirrors = self.ctx.mirrors
        repo = self.mirror.name
        candidates = [mirror_head]
        try:
            default = mirrors.repository(repo).default_branch
            candidates.append(mirrors.branch_head(repo, default))
        except Exception:  # noqa: BLE001 - no base is fine: full validation
            pass
        for cid in candidates:
            if cid and mirrors.is_present(repo, cid):
                try:
                    return mirrors.get_commit(repo, cid).metarange_id
                except CommitNotFoundError:
                    continue
        return None

    def _promote(self, st: RefProgress, name: str, mirror_head: str | None, *,
                 is_tag: bool) -> None:
        repo = self.mirror.name
        mirrors = self.ctx.mirrors
        mirrors.write_commits(repo, st.commits or [])
        mirrors.mark_present(repo, st.target)
        if is_tag:
            mirrors.set_tag(repo, name, st.target)
        else:
            try:
                mirrors.promote_branch(repo, name, mirror_head, st.target)
            except BranchChangedError:
                # another replica promoted meanwhile; fine if it is where we were going
                if mirrors.branch_head(repo, name) != st.target:
                    raise
                return
        self.ctx.metrics.promotions.labels(self.mirror.name).inc()
        log.info("promoted", extra={"mirror": self.mirror.id, "repository": repo,
                                    "ref": name, "commit": st.target})

    def _source_ref_deleted(self, name: str, row: MirrorBranch | None, *, is_tag: bool) -> None:
        repo = self.mirror.name
        if is_tag:
            self.ctx.mirrors.delete_tag(repo, name)
            self.refs.pop(TAG_PREFIX + name, None)
            return
        self.ctx.mirrors.delete_branch(repo, name)
        self._forget_ref(name)
        if row is not None:
            self._drop_progress(row)

    def _drop_progress(self, row: MirrorBranch) -> None:
        self._forget_ref(row.branch)
        try:
            self.ctx.table.delete_branch_progress(row.organization_id, row.mirror_id,
                                                  row.branch, row.version)
        except (BranchProgressNotFoundError, VersionConflictError):
            if self.ctx.progress is not None:
                self.ctx.progress.conflicted(row.mirror_id)
            return
        if self.ctx.progress is not None:
            self.ctx.progress.removed(row.mirror_id, row.branch)

    def _forget_ref(self, branch: str) -> None:
        """Drop what is kept in memory for a branch the source no longer has."""
        self.refs.pop(branch, None)
        self._rows.pop(branch, None)
        self._lag_from.pop(branch, None)
        self.ctx.metrics.forget_branch(self.mirror.name, branch)

    # ----------------------------------------------------------------- honest lag
    def _watch_lag(self, branch: str, since: float, *, keep: bool = False) -> None:
        """Let the branch's lag gauge count from ``since`` (``keep``: unless it counts
        from somewhere already)."""
        if keep and branch in self._lag_from:
            return
        first = branch not in self._lag_from
        self._lag_from[branch] = since
        if first:
            lag_from = self._lag_from
            self.ctx.metrics.lag_seconds.labels(self.mirror.name, branch).set_function(
                lambda: max(0.0, time.time() - lag_from.get(branch, time.time())))

    def _confirmed(self, branch: str, read_at: datetime) -> None:
        """The source's head, read at ``read_at``, is what the mirror serves now."""
        self._watch_lag(branch, read_at.timestamp())

    @staticmethod
    def _seen(row: MirrorBranch | None, read_at: datetime, *, confirmed: bool = False,
              now: bool = False) -> dict[str, datetime | None]:
        """The row's ``source_seen_at`` (and ``source_confirmed_at``) after a read of
        the source at ``read_at``; refreshed at most every :data:`CONFIRMATION_REFRESH`
        seconds unless ``now``."""
        refresh = (lambda _old, new: new) if now else _refreshed
        changes: dict[str, datetime | None] = {
            "source_seen_at": refresh(row.source_seen_at if row else None, read_at)}
        if confirmed:
            changes["source_confirmed_at"] = refresh(
                row.source_confirmed_at if row else None, read_at)
        return changes

    # -------------------------------------------------------------- progress rows
    def _record(self, row: MirrorBranch | None, branch: str,
                **changes: object) -> MirrorBranch | None:
        """Write the branch's progress row if anything changed (best effort).

        Returns the row as stored now (to pass to the next call).
        """
        if row is None:
            row = MirrorBranch(organization_id=self.ctx.organization_id,
                               mirror_id=self.mirror.id, branch=branch)
        new = replace(row, **changes)  # type: ignore[arg-type]
        if new == row and row.version:
            return row
        try:
            stored = self.ctx.table.put_branch_progress(new)
        except (VersionConflictError, MirrorsDatabaseError, ValidationError) as e:
            log.debug("progress of %s/%s not recorded: %s", self.mirror.id, branch, e)
            self._rows.pop(branch, None)  # read again by the next full round
            if self.ctx.progress is not None:
                self.ctx.progress.conflicted(self.mirror.id)
            return None
        self._rows[branch] = stored
        if self.ctx.progress is not None:
            self.ctx.progress.stored(stored)
        return stored

    def status(self) -> dict[str, RefProgress]:
        return dict(self.refs)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _refreshed(old: datetime | None, new: datetime) -> datetime:
    """``new``, or ``old`` while it is less than CONFIRMATION_REFRESH seconds older."""
    if old is not None and 0 <= (new - old).total_seconds() < CONFIRMATION_REFRESH:
        return old
    return new


class SourceUnreadableError(SourceError):
    """A round could not read the source's heads (unreachable, refused, not found)."""


def _foreign_object(item: MissingItem) -> bool:
    """An imported object whose address holds a different object in the destination."""
    return (item.kind is MissingKind.OBJECT and item.entry is not None
            and item.entry.address_type is AddressType.FULL and item.reason != "missing")
