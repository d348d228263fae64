"""How current a mirror is known to be: the honest lag, and whether the destination is
blind to its source (design I6).

A mirror branch is *current* only when the destination read the source's head
recently, found the mirror serving it, and nothing since kept it from reading again.
Its lag never reads less than the time since that confirmation, which the mirrors
table keeps (so a restarted sidecar, and every region's status view, start from it).
*Stale* (blind) is a state of its own: the source's heads were not read within
``stale_after`` seconds, or the mirror's last round could not read them at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from mirrors_db.models import GroupProgress, Mirror, MirrorBranch, MirrorGroup, SensorReading
from replication.lag_history import branch_lag
from replication.mirroring import SOURCE_UNREADABLE


@dataclass(frozen=True, slots=True)
class BranchFreshness:
    lag_seconds: float
    stale: bool
    current: bool


def source_unreadable(mirror: Mirror) -> bool:
    """Whether the mirror's last round could not read its source's heads."""
    return mirror.error.startswith(SOURCE_UNREADABLE)


def branch_freshness(mirror: Mirror, progress: MirrorBranch, now: float,
                     stale_after: float) -> BranchFreshness:
    """The branch's honest lag at ``now`` (Unix seconds), and whether it is stale or
    current."""
    seen = progress.source_seen_at
    stale = (source_unreadable(mirror) or seen is None
             or now - seen.timestamp() > stale_after)
    current = (not stale and progress.source_head is not None
               and progress.source_head == progress.promoted_commit)
    return BranchFreshness(branch_lag(progress, now), stale, current)




class Confirmations:
    """What the sensors' readings confirm, per mirror branch: the latest reading that
    found the branch at its source's head.

    A sensor confirms an idle mirror's branches in a page of its reading rather than in
    each branch's row; a branch's confirmation is the later of its row's and its
    readings'. :meth:`apply` gives the row as if the sensor had written it.
    """

    def __init__(self, readings: Iterable[SensorReading] = ()) -> None:
        self._at: dict[tuple[str, str], datetime] = {}
        for r in readings:
            for mirror_id, branches in r.confirmed.items():
                for branch in branches:
                    key = (mirror_id, branch)
                    at = self._at.get(key)
                    if at is None or r.read_at > at:
                        self._at[key] = r.read_at

    def at(self, mirror_id: str, branch: str) -> datetime | None:
        """When a reading last confirmed the branch (None: never)."""
        return self._at.get((mirror_id, branch))

    def apply(self, row: MirrorBranch) -> MirrorBranch:
        """The row with its readings' confirmation: ``source_seen_at`` and
        ``source_confirmed_at`` at the later of its own and the reading's."""
        at = self._at.get((row.mirror_id, row.branch))
        if at is None:
            return row
        seen, confirmed = row.source_seen_at, row.source_confirmed_at
        if (seen is not None and seen >= at) and (confirmed is not None and confirmed >= at):
            return row
        return replace(row, source_seen_at=at if seen is None or seen < at else seen,
                       source_confirmed_at=(at if confirmed is None or confirmed < at
                                            else confirmed))


def group_freshness(group: MirrorGroup, progress: GroupProgress, now: float,
                    stale_after: float) -> BranchFreshness:
    """A mirror group's honest lag at ``now`` (Unix seconds), and whether it is stale or
    current, as for a branch (I6).

    Every commit made on a member branch before the served cut was read is served; and
    when the served cut is the group's newest, so is every commit made before the
    source last read the member heads and found them at it (``heads_read_at``). The
    group is stale while the source has not read its member heads within
    ``stale_after`` seconds (its sidecar is down or cut off): never current then.
    """
    confirmed = progress.served_taken_at if progress.served_cut else None
    read = group.heads_read_at
    if (progress.served_cut and progress.served_cut == group.last_cut and read is not None
            and (confirmed is None or read > confirmed)):
        confirmed = read
    since = confirmed or group.created_at
    stale = read is None or now - read.timestamp() > stale_after
    current = not stale and group.last_cut > 0 and progress.served_cut == group.last_cut
    return BranchFreshness(max(0.0, now - since.timestamp()), stale, current)
