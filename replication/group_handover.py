"""Detach, switchover and failback of a whole mirror group, one request each, keeping
the cut (design I8).

They run in the group's destination region, as those of one mirror do
(:mod:`replication.handover`), and act on every member mirror of the group:

- **Detach** (failover): every member mirror is detached at the cut the region serves.
  No round of the group's follower runs meanwhile, and the members move only all
  together anyway (one transaction, refused once a member is detached), so no member is
  ever newer than another. The cut is named in the answer and stays the group's served
  cut.
- **Switchover** (RPO 0): every member's source repository is made read-only, the
  source region is asked to cut the frozen heads, and the switchover waits until every
  member mirror serves every head of its source; then the group is detached as above
  and the **reverse group** formed: the old group is retired in its source region,
  a group of the same name from this region into the old one is created *before* its
  mirrors (so the old sources never move one member on its own), and each old source
  repository is adopted as the read-only mirror of its member here. A group that does
  not catch up in time is refused: the sources are writable again, nothing else changed.
- **Failback** (after a group detach, the old region back): the old source repositories
  are made read-only, each one's heads this region lacks are kept here on
  ``failover-<time>-<branch>`` branches (as for one mirror), then the reverse group is
  formed as above: the old source repositories follow this region, their member
  branches moving to its first cut all together.

Each answer gives the time each phase took.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lakefs_core.errors import ValidationError
from mirrors_db.errors import GroupNotFoundError, MirrorNotFoundError, MirrorsDatabaseError
from mirrors_db.models import (
    GroupCut,
    GroupMember,
    GroupProgress,
    GroupSpec,
    Mirror,
    MirrorGroup,
    MirrorState,
    new_mirror_id,
)
from replication.handover import DEFAULT_TIMEOUT, Handover, HandoverError, KeptHead, Phases
from replication.sidecar import Sidecar, shown_state

log = logging.getLogger("replication.group_handover")

INTERNAL_GROUPS = "/service/replication/v1/internal/groups"


@dataclass
class GroupHandoverResult:
    """What a group detach, switchover or failback did.

    Attributes:
        group: The group detached, or the reverse group a switchover or failback formed.
        cut: The cut the members were detached at (None: they served none yet).
        detached: The member mirrors, detached.
        mirrors: The reverse mirrors (a switchover or failback).
        kept: Per member mirror id, the old source's heads kept here (a failback).
        discarded: Per old source repository, its branches whose uncommitted changes the
            adoption discarded.
        phases: The time each phase took.
    """

    group: MirrorGroup
    cut: GroupCut | None
    detached: list[Mirror]
    phases: list[dict[str, Any]]
    mirrors: list[Mirror] = field(default_factory=list)
    kept: dict[str, list[KeptHead]] = field(default_factory=dict)
    discarded: dict[str, list[str]] = field(default_factory=dict)


class GroupHandover(Handover):
    """Detach, switchover and failback of the groups whose destination is this region."""

    def members(self, group: MirrorGroup, state: MirrorState, action: str,
                also: MirrorState | None = None) -> list[Mirror]:
        """The group's member mirrors, each once, in member order.

        Raises:
            ValidationError: not the group's destination region, no members, or a member
                mirror is neither in ``state`` nor in ``also``.
        """
        if group.destination_region != self.region:
            raise ValidationError(f"{action} group {group.id} in its destination region "
                                  f"{group.destination_region!r}")
        table = self.sidecar.table
        mirrors = [table.get_mirror(self.sidecar.org, mirror_id)
                   for mirror_id in dict.fromkeys(m.mirror_id for m in group.members)]
        if not mirrors:
            raise ValidationError(f"group {group.id} has no members")
        wrong = [f"mirror {m.id} ({m.name}) is {shown_state(m).value}" for m in mirrors
                 if shown_state(m) not in (state, also)]
        if wrong:
            raise ValidationError(f"{action} of group {group.id} needs every member mirror "
                                  f"{state.value}: " + "; ".join(wrong))
        return mirrors

    # -------------------------------------------------------------------- detach
    def detach_group(self, group: MirrorGroup) -> GroupHandoverResult:
        """Detach every member mirror at the cut this region serves (failover).

        Raises:
            ValidationError: a member is not active, or this is not the group's
                destination region.
        """
        # members detached already (a detach that stopped half-way) are detached again
        mirrors = self.members(group, MirrorState.ACTIVE, "detach", also=MirrorState.DETACHED)
        if all(shown_state(m) is MirrorState.DETACHED for m in mirrors):
            raise ValidationError(f"group {group.id} is detached already")
        phases = Phases()
        with phases.phase("detach"):
            detached, cut = self._detach_at_cut(group, mirrors)
        log.info("group detached", extra={"group": group.id,
                                          "cut": cut.sequence if cut else 0})
        return GroupHandoverResult(group, cut, detached, phases.as_json())

    def _detach_at_cut(self, group: MirrorGroup, mirrors: list[Mirror]
                       ) -> tuple[list[Mirror], GroupCut | None]:
        """Detach the members with no round of this sidecar's follower of the group
        under way; record and return the cut they serve.

        A promotion by another replica of this region that passed its checks just before
        moves every member or none (it is one transaction), so the members stay at one
        cut even then.
        """
        sidecar = self.sidecar
        with sidecar.groups.round_lock(group.id):
            detached = [sidecar.detach(m) for m in mirrors]
            return detached, self._served_cut(group, mirrors)

    def _served_cut(self, group: MirrorGroup, mirrors: list[Mirror]) -> GroupCut | None:
        """The cut the member branches serve here, recorded as the group's served cut
        (None: no cut reached them yet)."""
        sidecar, org = self.sidecar, self.sidecar.org
        names = {m.id: m.name for m in mirrors}
        found = sidecar.mirrors.heads_at_once([(names[m.mirror_id], m.branch)
                                               for m in group.members])
        heads = {m: found.get((names[m.mirror_id], m.branch)) for m in group.members}
        progress = sidecar.table.get_group_progress(org, group.id) or GroupProgress(org,
                                                                                   group.id)
        cuts = sidecar.table.list_cuts(org, group.id, after=max(0, progress.served_cut - 1))
        cut = next((c for c in reversed(cuts)
                    if c.heads and all(heads[m] == head for m, head in c.heads.items())),
                   None)
        if cut is not None:
            try:
                sidecar.table.put_group_progress(GroupProgress(
                    org, group.id, served_cut=cut.sequence, served_taken_at=cut.taken_at,
                    served_at=progress.served_at if cut.sequence == progress.served_cut
                    else datetime.now(UTC), version=progress.version))
            except MirrorsDatabaseError as e:  # the status may name an older cut
                log.warning("group %s: served cut not recorded: %s", group.id, e)
        return cut

    # ----------------------------------------------------------------- switchover
    def switchover_group(self, group: MirrorGroup, timeout: float = DEFAULT_TIMEOUT
                         ) -> GroupHandoverResult:
        """Move the primary of every member to this region, no commit lost, the members
        at one cut throughout (see module doc).

        Raises:
            ValidationError: a member is not active, or this is not the destination.
            HandoverError: the members did not catch up in time, or a region refused.
        """
        mirrors = self.members(group, MirrorState.ACTIVE, "switchover")
        region = group.source_region
        sources = list(dict.fromkeys(m.source_repository for m in mirrors))
        phases = Phases()
        was_writable: dict[str, bool] = {}
        try:
            with phases.phase("freeze sources"):
                for repo in sources:
                    was_writable[repo] = self._freeze(region, repo)
            with phases.phase("catch up"):
                self._catch_up(mirrors, time.monotonic() + timeout, f"group {group.id}",
                               nudge=lambda: self._ask_cut(group))
        except HandoverError as e:
            raise HandoverError(f"{e}; {self._thaw_all(region, was_writable)}") from None
        except BaseException:
            self._thaw_all(region, was_writable)
            raise
        with phases.phase("detach"):
            detached, cut = self._detach_at_cut(group, mirrors)
        with phases.phase("reverse group"):
            reverse, reverse_mirrors, discarded = self._reverse_group(group, detached)
        log.info("group switchover", extra={"group": group.id, "reverse": reverse.id})
        return GroupHandoverResult(reverse, cut, detached, phases.as_json(),
                                   mirrors=reverse_mirrors, discarded=discarded)

    def _thaw_all(self, region: str, was_writable: dict[str, bool]) -> str:
        """Make the sources that were writable before the freeze writable again; says
        what was done, for the refusal."""
        for repo, writable in was_writable.items():
            if writable:
                self._thaw(region, repo)
        kept = sorted(repo for repo, writable in was_writable.items() if not writable)
        return ("the sources are writable again" if not kept else
                "the sources are writable again but for " + ", ".join(kept)
                + ", read-only before, which stay so")

    def _ask_cut(self, group: MirrorGroup) -> None:
        """Have the source region cut the member heads now (its sweep would, later)."""
        try:
            self._ask(group.source_region, f"{INTERNAL_GROUPS}/{group.id}/cut", {},
                      f"cut group {group.id}")
        except HandoverError as e:
            log.warning("group %s: %s", group.id, e, extra={"group": group.id})

    # ------------------------------------------------------------------- failback
    def failback_group(self, group: MirrorGroup, timeout: float = DEFAULT_TIMEOUT
                       ) -> GroupHandoverResult:
        """Make the old source repositories of a detached group follow this region,
        their heads that never arrived here kept on failover branches (see module doc).

        Raises:
            ValidationError: a member is not detached, or this is not the destination.
            HandoverError: a head could not be kept, or a region refused.
        """
        mirrors = self.members(group, MirrorState.DETACHED, "failback")
        phases = Phases()
        with phases.phase("freeze old sources"):
            for repo in dict.fromkeys(m.source_repository for m in mirrors):
                self._freeze(group.source_region, repo)
        with phases.phase("keep diverged heads"):
            deadline = time.monotonic() + timeout
            kept = {m.id: self._keep_diverged(m, deadline) for m in mirrors}
        with phases.phase("reverse group"):
            reverse, reverse_mirrors, discarded = self._reverse_group(group, mirrors)
        log.info("group failback", extra={"group": group.id, "reverse": reverse.id,
                                          "kept": sum(len(k) for k in kept.values())})
        return GroupHandoverResult(reverse, None, mirrors, phases.as_json(),
                                   mirrors=reverse_mirrors, kept=kept, discarded=discarded)

    # ----------------------------------------------------------------------- both
    def _reverse_group(self, group: MirrorGroup, detached: list[Mirror]
                       ) -> tuple[MirrorGroup, list[Mirror], dict[str, list[str]]]:
        """Retire the old group in its source region, form the group of the same name
        from this region into it, then its mirrors (the old source repositories,
        adopted), and take its first cut."""
        ids = {m.id: new_mirror_id() for m in detached}
        self._ask(group.source_region, f"{INTERNAL_GROUPS}/{group.id}/retire", {},
                  f"retire group {group.id}")
        # before its mirrors: the old region's rounds never see them outside the group
        reverse = self.sidecar.table.create_group(GroupSpec(
            self.sidecar.org, group.name, self.region, group.source_region,
            tuple(GroupMember(ids[m.mirror_id], m.branch) for m in group.members)))
        self.sidecar.source_index.add_group(reverse)
        mirrors: list[Mirror] = []
        discarded: dict[str, list[str]] = {}
        for m in detached:
            mirror, dropped = self._reverse(m, ids[m.id])
            mirrors.append(mirror)
            if dropped:
                discarded[mirror.name] = dropped
        self.sidecar.group_cutter.take(reverse.id, "moved")
        return self.sidecar.table.get_group(self.sidecar.org, reverse.id), mirrors, discarded


def retire_group(sidecar: Sidecar, group_id: str) -> None:
    """Delete a group of this (its source) region whose members were all detached: a
    handover retires it before it forms the reverse group. Gone already: done.

    Raises:
        ValidationError: not this region's group, or a member still follows its source.
    """
    try:
        group = sidecar.table.get_group(sidecar.org, group_id)
    except GroupNotFoundError:
        return
    if group.source_region != sidecar.region:
        raise ValidationError(f"group {group_id} is region {group.source_region!r}'s")
    following = []
    for member in group.members:
        try:
            mirror = sidecar.table.get_mirror(sidecar.org, member.mirror_id)
        except MirrorNotFoundError:
            continue
        if shown_state(mirror) not in (MirrorState.DETACHED, MirrorState.DELETING,
                                       MirrorState.DELETED):
            following.append(f"mirror {mirror.id} is {shown_state(mirror).value}")
    if following:
        raise ValidationError(f"group {group_id} is not detached: " + "; ".join(following))
    sidecar.table.delete_group(sidecar.org, group_id)
