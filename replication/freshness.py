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

from dataclasses import dataclass

from mirrors_db.models import GroupProgress, Mirror, MirrorBranch, MirrorGroup
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
