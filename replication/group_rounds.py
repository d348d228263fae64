"""The mirror groups of a destination region, followed by the sidecar: a round of
each group whose destination is this region, under the group's lease, and the
branches the groups move (they never move on their own). The source side's cuts are
:class:`replication.groups.GroupCutter`'s."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

import httpx

from lakefs_core.errors import LakeFSError
from mirrors_db.errors import LeaseHeldError, MirrorsDatabaseError
from mirrors_db.models import Lease, MirrorGroup
from replication.groups import GroupFollower, grouped_branches

if TYPE_CHECKING:
    from replication.sidecar import Sidecar

log = logging.getLogger("replication.sidecar")


class GroupRounds:
    """The groups a sidecar follows."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        #: followers of the groups whose destination is this region, by group id
        self._followers: dict[str, GroupFollower] = {}
        #: per mirror id, its branches that a group of this region moves
        self._grouped: dict[str, frozenset[str]] = {}
        #: held by a round of a group's follower (and by a group handover, so that no
        #: round of this sidecar moves the members meanwhile), by group id
        self._rounds: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: the group leases this replica holds, by group id
        self.leases: dict[str, Lease] = {}

    def grouped_of(self, mirror_id: str) -> frozenset[str]:
        """The mirror's branches that a group of this region moves."""
        return self._grouped.get(mirror_id, frozenset())

    def read_grouped(self) -> None:
        """Read which branches the groups of this region move (before any round of their
        mirrors: a grouped branch never moves on its own)."""
        self._grouped = grouped_branches(self._mine())

    def _mine(self) -> list[MirrorGroup]:
        sidecar = self.sidecar
        return [g for g in sidecar.table.list_groups(sidecar.org)
                if g.destination_region == sidecar.region]

    def round_lock(self, group_id: str) -> threading.Lock:
        """The lock a round of the group's follower in this sidecar holds."""
        with self._lock:
            return self._rounds.setdefault(group_id, threading.Lock())

    def wake(self) -> None:
        """Run a round now (a group or a cut changed, or stopping)."""
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Cut the groups whose source is here, and follow those whose destination is
        here, until ``stop``."""
        sidecar = self.sidecar
        next_sweep = 0.0
        while not stop.is_set():
            due = time.monotonic() + sidecar.sense_interval
            try:
                if time.monotonic() >= next_sweep:  # cuts of groups whose source is here
                    next_sweep = time.monotonic() + sidecar.sense_interval
                    sidecar.group_cutter.sweep()
                due = min(due, self.follow() or due)
            except (LakeFSError, httpx.HTTPError) as e:
                log.warning("mirror groups round: %s", e)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("mirror groups round failed")
            self._wake.wait(timeout=max(0.0, due - time.monotonic()))
            self._wake.clear()

    def follow(self) -> float | None:
        """One round of every group whose destination is this region (each under its
        lease). Returns when (monotonic) a group wants to run again, if any does."""
        sidecar = self.sidecar
        table = sidecar.table
        mine = self._mine()
        self._grouped = grouped_branches(mine)
        ids = {g.id for g in mine}
        for gone in set(self._followers) - ids:
            self._followers.pop(gone).close()
            self.leases.pop(gone, None)
            progress = table.get_group_progress(sidecar.org, gone)
            if progress is not None:  # this region's row of a deleted group
                with contextlib.suppress(MirrorsDatabaseError):
                    table.delete_group_progress(sidecar.org, gone, progress.version)
        due: list[float] = []
        for group in mine:
            try:
                self.leases[group.id] = table.acquire_lease(
                    sidecar.org, f"{sidecar.region}/group/{group.id}", sidecar.owner,
                    sidecar.lease_ttl)
            except LeaseHeldError:
                continue
            follower = self._followers.get(group.id)
            if follower is None:
                follower = self._followers[group.id] = GroupFollower(
                    sidecar.ctx, group, sidecar.stale_after)
            try:
                with self.round_lock(group.id):
                    at = follower.process()
                sidecar.last_errors.pop(f"group:{group.id}", None)
            except (LakeFSError, httpx.HTTPError, OSError) as e:
                log.warning("group %s (%s): %s", group.id, group.name, e,
                            extra={"group": group.id})
                sidecar.last_errors[f"group:{group.id}"] = str(e)
                at = time.monotonic() + min(sidecar.error_cooldown, sidecar.sense_interval)
            if at is not None:
                due.append(at)
        return min(due) if due else None
