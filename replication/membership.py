"""The replicas of a region that live: each renews a membership lease
``<region>/replica/<owner>`` every few seconds, and hears of the others' in the mirrors
table's change feed. The live replicas share the region's mirrors out by shard
(:mod:`replication.shards`)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from mirrors_db.errors import LeaseHeldError, MirrorsDatabaseError
from mirrors_db.models import ChangeEvent, Lease
from mirrors_db.table import MirrorsTable

log = logging.getLogger("replication.membership")

#: seconds between two renewals of a replica's membership lease (at most)
MEMBERSHIP_PERIOD = 5.0


class Membership:
    """This replica's membership, and what it heard of the others'.

    Args:
        table: The mirrors table.
        organization_id: The organization.
        region: This region.
        owner: This replica's lease owner id.
        ttl: The membership lease's term (seconds); renewed every
            ``min(MEMBERSHIP_PERIOD, ttl / 3)``.
        changed: Called when another replica is heard of first, or stops.
    """

    def __init__(self, table: MirrorsTable, organization_id: str, region: str, owner: str,
                 ttl: float, changed: Callable[[], None] = lambda: None) -> None:
        self.table = table
        self.org = organization_id
        self.prefix = f"{region}/replica/"
        self.owner = owner
        self.ttl = ttl
        self.period = min(MEMBERSHIP_PERIOD, ttl / 3)
        self._changed = changed
        self._lock = threading.Lock()
        #: the other replicas that said they live, and until when (monotonic)
        self._peers: dict[str, float] = {}
        #: this replica's membership lease, once taken
        self.lease: Lease | None = None

    def run(self, stop: threading.Event) -> None:
        """Renew this replica's membership until ``stop``."""
        while not stop.is_set():
            try:
                self.lease = self.table.acquire_lease(self.org, self.prefix + self.owner,
                                                      self.owner, self.ttl)
            except (LeaseHeldError, MirrorsDatabaseError) as e:
                log.warning("membership of this replica: %s", e)
            stop.wait(self.period)

    def changed(self, event: ChangeEvent) -> None:
        """A lease event of the feed: another replica of this region says it lives, or
        that it stopped."""
        name = event.key[0]
        if not name.startswith(self.prefix) or name == self.prefix + self.owner:
            return
        owner = name[len(self.prefix):]
        now = time.monotonic()
        with self._lock:
            before = self._peers.get(owner, -math.inf) > now
            if event.deleted:
                self._peers.pop(owner, None)
            elif isinstance(event.row, Lease):
                left = (event.row.expires_at - datetime.now(UTC)).total_seconds()
                self._peers[owner] = now + left
            after = self._peers.get(owner, -math.inf) > now
        if before != after:
            self._changed()

    def live(self) -> set[str]:
        """The other replicas of this region that live, as far as this one has heard
        (their owner ids)."""
        now = time.monotonic()
        with self._lock:
            return {owner for owner, until in self._peers.items() if until > now}
