"""Mirror groups: cuts taken in the source region, promoted all at once in the destination.

A group names mirrors with the same source and destination regions, and a branch of
each (design I8). Its two halves run in different regions:

- :class:`GroupCutter` (source region, the group rows' writing region): a *cut* is the
  heads of the member branches read at one snapshot of the source's refstore
  (``MirrorService.heads_at_once``), so no commit of one member is seen without the
  commits that reached another before it. Cuts are taken when a member head moves (the
  server's ref events, and a periodic sweep for missed ones) and on request; a sweep
  that finds the heads at the last cut records when it read them (``heads_read_at``,
  what the destination's honest lag counts from).
- :class:`GroupFollower` (destination region, under the group's lease): the member
  branches move only to a cut, all together. A cut is promoted once every member's
  commit is proven present (each member's :class:`MirrorFollower` validates, as for a
  lone mirror), by ``MirrorService.promote_branches``: one transaction of the
  destination's refstore. The newest complete cut wins; older ones are skipped.

Mirror followers leave grouped branches alone (``MirrorContext.grouped``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from lakefs_core.errors import BranchChangedError, LakeFSError
from lakefs_core.graveler.mirror import BranchMove, MirrorService
from lakefs_core.graveler.model import CommitRecord
from lakefs_core.graveler.presence import MissingItem, MissingKind
from mirrors_db.errors import MirrorNotFoundError, MirrorsDatabaseError, VersionConflictError
from mirrors_db.models import (
    GroupCut,
    GroupMember,
    GroupProgress,
    Mirror,
    MirrorGroup,
    MirrorState,
)
from mirrors_db.table import MirrorsTable
from replication.freshness import BranchFreshness, group_freshness
from replication.mirroring import (
    CONFIRMATION_REFRESH,
    MirrorContext,
    MirrorFollower,
)
from replication.source import SourceError

log = logging.getLogger("replication.groups")

#: the newest cuts a destination looks at each round (the newest complete one wins)
CANDIDATE_CUTS = 5


def _utcnow() -> datetime:
    return datetime.now(UTC)


# ------------------------------------------------------------------ source side
class GroupCutter:
    """Takes the cuts of the groups whose source is this region.

    Args:
        table: The mirrors table.
        mirrors: The engine's mirroring interface over this region's refstore.
        organization_id: The organization.
        region: This region.
    """

    def __init__(self, table: MirrorsTable, mirrors: MirrorService, organization_id: str,
                 region: str) -> None:
        self.table = table
        self.mirrors = mirrors
        self.org = organization_id
        self.region = region
        self._sources: dict[str, str] = {}  # mirror id -> its source repository

    def _source_of(self, mirror_id: str) -> str:
        repo = self._sources.get(mirror_id)
        if repo is None:  # written once, never changed: kept
            repo = self.table.get_mirror(self.org, mirror_id).source_repository
            self._sources[mirror_id] = repo
        return repo

    def groups(self) -> list[MirrorGroup]:
        """The groups whose source is this region."""
        return [g for g in self.table.list_groups(self.org) if g.source_region == self.region]

    @retry(retry=retry_if_exception_type(VersionConflictError), stop=stop_after_attempt(5),
           wait=wait_random_exponential(multiplier=0.02, max=0.5), reraise=True)
    def take(self, group_id: str, reason: str = "moved") -> GroupCut | None:
        """Read the member heads at one snapshot; store them as the group's next cut
        unless they are the last cut's (then only when they were read is recorded, at
        most every few seconds). Returns the group's newest cut (None: none yet, and
        no member has a head).

        Another replica's cut in between makes this one read the heads again, so cuts
        are numbered in the order they were read.
        """
        group = self.table.get_group(self.org, group_id)
        refs = {m: (self._source_of(m.mirror_id), m.branch) for m in group.members}
        read_at = _utcnow()  # before the read: every commit made until now is in it
        found = self.mirrors.heads_at_once(list(refs.values()))
        heads = {m: found[ref] for m, ref in refs.items() if ref in found}
        last = (self.table.list_cuts(self.org, group.id, after=group.last_cut - 1)
                if group.last_cut else [])
        if last and last[-1].heads == heads:
            seen = group.heads_read_at
            if seen is None or (read_at - seen).total_seconds() >= CONFIRMATION_REFRESH:
                self.table.update_group(replace(group, heads_read_at=read_at))
            return last[-1]
        if not heads and not last:
            return None
        _, cut = self.table.add_cut(group, heads, read_at, reason)
        log.info("cut taken", extra={"group": group.id, "cut": cut.sequence,
                                     "reason": reason})
        return cut

    def sweep(self, repositories: Iterable[str] | None = None,
              groups: list[MirrorGroup] | None = None) -> int:
        """Take a cut of every group of this region (only those with a member in
        ``repositories``, when given; of ``groups``, when given, else of those the table
        lists). Returns the groups looked at."""
        wanted = None if repositories is None else set(repositories)
        n = 0
        for group in self.groups() if groups is None else groups:
            if wanted is not None and not any(self._source_of(m.mirror_id) in wanted
                                              for m in group.members):
                continue
            n += 1
            try:
                self.take(group.id)
            except (LakeFSError, MirrorsDatabaseError) as e:
                log.warning("group %s: no cut taken: %s", group.id, e,
                            extra={"group": group.id})
        return n


# ------------------------------------------------------------- destination side
@dataclass
class _MemberHead:
    """What the destination knows of one member's commit in a cut."""

    records: list[CommitRecord] | None = None
    missing: list[MissingItem] = field(default_factory=list)
    complete: bool = False


class GroupFollower:
    """Moves a group's member branches in this (its destination) region, a cut at a time.

    Not thread-safe: one worker at a time per group (under the group's lease).
    """

    def __init__(self, ctx: MirrorContext, group: MirrorGroup,
                 stale_after: float = math.inf) -> None:
        self.ctx = ctx
        self.group = group
        #: the group's progress here, as this follower last read or wrote it
        self.progress = GroupProgress(ctx.organization_id, group.id)
        self.stale_after = stale_after
        self._published = False
        self._validators: dict[str, MirrorFollower] = {}
        self._heads: dict[tuple[str, str], _MemberHead] = {}
        self._mirrors: dict[str, Mirror] = {}
        #: what each member head lacked in this round: an older cut sharing that head
        #: is not promoted on a later look in the same round (the newest wins)
        self._round: dict[tuple[str, str], str] = {}

    def _mirror(self, mirror_id: str) -> Mirror:
        m = self._mirrors.get(mirror_id)
        if m is None:
            m = self.ctx.table.get_mirror(self.ctx.organization_id, mirror_id)
            self._mirrors[mirror_id] = m
        return m

    def _validator(self, mirror: Mirror) -> MirrorFollower:
        v = self._validators.get(mirror.id)
        if v is None:
            v = MirrorFollower(self.ctx, mirror, track_lag=False)
            self._validators[mirror.id] = v
        return v

    def process(self) -> float | None:
        """One round. Returns when (monotonic) it wants to run again; None when nothing
        waits (a new cut or the sweep wakes it)."""
        ctx = self.ctx
        self.group = ctx.table.get_group(ctx.organization_id, self.group.id)
        progress = (ctx.table.get_group_progress(ctx.organization_id, self.group.id)
                    or GroupProgress(ctx.organization_id, self.group.id))
        self.progress = progress
        inactive = self._inactive()
        if inactive and set(inactive.values()) == {MirrorState.DETACHED} and len(
                inactive) == len({m.mirror_id for m in self.group.members}):
            # the group was detached: every member stays at the cut it serves
            self._heads.clear()
            self.close()
            return None
        cuts = ctx.table.list_cuts(ctx.organization_id, self.group.id,
                                   after=progress.served_cut)
        candidates = cuts[-CANDIDATE_CUTS:]
        self._round = {}
        if inactive:
            # no cut moves some members without the others
            self._record(progress, waiting_cut=cuts[-1].sequence if cuts else 0,
                         waiting_for="; ".join(f"mirror {i} is {state.value}"
                                               for i, state in sorted(inactive.items())),
                         error="")
            creating = any(state is MirrorState.CREATING for state in inactive.values())
            return time.monotonic() + max(ctx.recheck_interval, 0.1) if creating else None
        if not candidates:
            self._heads.clear()
            self._record(progress, waiting_cut=0, waiting_for="", error="")
            return None
        waiting_for = ""
        try:
            for cut in reversed(candidates):  # the newest complete cut wins
                lacking = self._lacking(cut)
                if not lacking:
                    self._promote(cut)
                    self._record(progress, served_cut=cut.sequence,
                                 served_taken_at=cut.taken_at, served_at=_utcnow(),
                                 waiting_cut=0 if cut is candidates[-1] else cuts[-1].sequence,
                                 waiting_for="", error="")
                    self._forget(candidates)
                    return None if cut is candidates[-1] else time.monotonic()
                if cut is candidates[-1]:
                    waiting_for = "; ".join(lacking)
        except (LakeFSError, OSError, MirrorsDatabaseError) as e:
            self._record(progress, error=str(e))
            raise
        self._record(progress, waiting_cut=cuts[-1].sequence, waiting_for=waiting_for,
                     error="")
        self._forget(candidates)
        return time.monotonic() + max(ctx.recheck_interval, 0.1)

    def _inactive(self) -> dict[str, MirrorState]:
        """The member mirrors that do not follow their sources now, by id (read afresh:
        a member detached, deleted or still being created)."""
        inactive = {}
        for mirror_id in dict.fromkeys(m.mirror_id for m in self.group.members):
            try:
                mirror = self.ctx.table.get_mirror(self.ctx.organization_id, mirror_id)
            except MirrorNotFoundError:  # a handover forms the group before its mirrors
                inactive[mirror_id] = MirrorState.CREATING
                continue
            self._mirrors[mirror_id] = mirror
            if mirror.state is not MirrorState.ACTIVE:
                inactive[mirror_id] = mirror.state
        for gone in set(self._mirrors) - {m.mirror_id for m in self.group.members}:
            del self._mirrors[gone]
        return inactive

    def _forget(self, candidates: list[GroupCut]) -> None:
        """Drop what is known of heads no candidate cut holds any more."""
        keep = {(m.mirror_id, c) for cut in candidates for m, c in cut.heads.items()}
        for key in set(self._heads) - keep:
            del self._heads[key]

    def _lacking(self, cut: GroupCut) -> list[str]:
        """What keeps ``cut`` from being promoted, per member (empty: complete)."""
        lacking = []
        for member in self.group.members:
            head = cut.heads.get(member)
            if head is None:
                continue  # the member branch had no head at the source: left as it is
            key = (member.mirror_id, head)
            if key not in self._round:
                self._round[key] = self._member_lacks(member, head)
            text = self._round[key]
            if text:
                lacking.append(f"{member.mirror_id}/{member.branch} at {head[:12]}: {text}")
        return lacking

    def _member_lacks(self, member: GroupMember, head: str) -> str:
        mirror = self._mirror(member.mirror_id)
        mirrors = self.ctx.mirrors
        st = self._heads.setdefault((mirror.id, head), _MemberHead())
        if st.complete or mirrors.is_present(mirror.name, head):
            st.complete = True
            return ""
        if st.records is None:
            client = self.ctx.source_client(mirror.source_region)
            st.records = client.new_commits(
                mirror.source_repository, head,
                known=lambda c: mirrors.has_commit(mirror.name, c),
                page_size=self.ctx.log_page_size)
        target = (st.records[-1] if st.records
                  else CommitRecord(head, mirrors.get_commit(mirror.name, head)))
        if target.id != head:
            raise SourceError(f"source log did not start at {head}")
        validator = self._validator(mirror)
        if st.missing:
            st.missing = validator.recheck(st.missing, target)  # cheap: what was missing
        if not st.missing:
            st.missing = validator.prove(target)
        if st.missing:
            n_obj = sum(1 for i in st.missing if i.kind is MissingKind.OBJECT)
            return f"{n_obj} objects and {len(st.missing) - n_obj} ranges missing"
        st.complete = True
        return ""

    def _promote(self, cut: GroupCut) -> None:
        """Write every member's commit records, then move all member branches in one
        transaction of this region's refstore."""
        mirrors = self.ctx.mirrors
        moves: list[BranchMove] = []
        for member in self.group.members:
            head = cut.heads.get(member)
            if head is None:
                continue
            mirror = self._mirror(member.mirror_id)
            st = self._heads.get((mirror.id, head))
            if st is not None and st.records:
                mirrors.write_commits(mirror.name, st.records)
            mirrors.mark_present(mirror.name, head)
            current = mirrors.branch_head(mirror.name, member.branch)
            if current != head:
                moves.append(BranchMove(mirror.name, member.branch, current, head))
        if moves:
            try:
                mirrors.promote_branches(moves)
            except BranchChangedError:
                # another replica promoted meanwhile: fine if every branch is at the cut
                if any(mirrors.branch_head(m.repo, m.branch) != m.new for m in moves):
                    raise
        log.info("cut promoted", extra={"group": self.group.id, "cut": cut.sequence,
                                        "branches": len(moves)})

    def _record(self, progress: GroupProgress, **changes: object) -> None:
        """Write the group's progress row if anything changed (best effort)."""
        new = replace(progress, **changes)  # type: ignore[arg-type]
        self.progress = new
        self._publish()
        if new == progress and progress.version:
            return
        try:
            self.progress = self.ctx.table.put_group_progress(new)
        except MirrorsDatabaseError as e:
            log.debug("progress of group %s not recorded: %s", self.group.id, e)

    # ----------------------------------------------------------------- metrics
    def freshness(self) -> BranchFreshness:
        """The group's honest lag now, and whether it is stale or current (I6)."""
        return group_freshness(self.group, self.progress, time.time(), self.stale_after)

    def _publish(self) -> None:
        """Show the group's progress on the sidecar's metrics; its lag grows at every
        scrape while the source does not read the member heads."""
        metrics, name = self.ctx.metrics, self.group.name
        metrics.group_served_cut.labels(name).set(self.progress.served_cut)
        metrics.group_waiting_cut.labels(name).set(self.progress.waiting_cut)
        if not self._published:
            self._published = True
            metrics.group_lag_seconds.labels(name).set_function(
                lambda: self.freshness().lag_seconds)
            metrics.group_source_unread.labels(name).set_function(
                lambda: float(self.freshness().stale))

    def close(self) -> None:
        """Drop the group's series: this region no longer follows it."""
        if self._published:
            self._published = False
            self.ctx.metrics.forget_group(self.group.name)


def grouped_branches(groups: Iterable[MirrorGroup]) -> dict[str, frozenset[str]]:
    """Per mirror id, the branches of it that the groups move."""
    out: dict[str, set[str]] = {}
    for g in groups:
        for m in g.members:
            out.setdefault(m.mirror_id, set()).add(m.branch)
    return {k: frozenset(v) for k, v in out.items()}

