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

from mirrors_db.models import Mirror, MirrorBranch
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


