"""The replicas of a region that live: each renews a membership lease
``<region>/replica/<owner>`` every few seconds, and hears of the others' in the mirrors
table's change feed. A replica that knows it is alone keeps idle mirrors' leases (no
other replica would hear of their moves); otherwise it lets them go once idle."""

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
        feed_open: Whether the change feed is open now (the others are heard of in it).
    """

    def __init__(self, table: MirrorsTable, organization_id: str, region: str, owner: str,
                 ttl: float, feed_open: Callable[[], bool]) -> None:
        self.table = table
        self.org = organization_id
        self.prefix = f"{region}/replica/"
        self.owner = owner
        self.ttl = ttl
        self.period = min(MEMBERSHIP_PERIOD, ttl / 3)
        self._feed_open = feed_open
        self._lock = threading.Lock()
        #: the other replicas that said they live, and until when (monotonic)
        self._peers: dict[str, float] = {}
        #: from when (monotonic) the feed has been open long enough to have heard of all
        self._known_at = math.inf
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

    def feed_opened(self) -> None:
        """The feed opened: every other replica is heard of within two periods."""
        with self._lock:
            self._known_at = time.monotonic() + 2 * self.period

    def changed(self, event: ChangeEvent) -> None:
        """A lease event of the feed: another replica of this region says it lives, or
        that it stopped."""
        name = event.key[0]
        if not name.startswith(self.prefix) or name == self.prefix + self.owner:
            return
        owner = name[len(self.prefix):]
        with self._lock:
            if event.deleted:
                self._peers.pop(owner, None)
            elif isinstance(event.row, Lease):
                left = (event.row.expires_at - datetime.now(UTC)).total_seconds()
                self._peers[owner] = time.monotonic() + left

    def alone(self) -> bool:
        """Whether this replica knows it is the only one of its region: the change feed
        is open, has been long enough to hear of the others, and no other lives."""
        now = time.monotonic()
        with self._lock:
            if not self._feed_open() or now < self._known_at:
                return False
            return all(until <= now for until in self._peers.values())
