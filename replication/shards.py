"""Shards of a region's mirrors, and which replica of the region follows each.

The mirrors whose destination is a region are split into :data:`SHARDS` shards by
their id (:func:`shard_of`). A replica runs the rounds of a shard's mirrors only while
it holds the shard's lease ``<region>/shard/<k>`` in the mirrors table:

- the live replicas (:mod:`replication.membership`), sorted by owner id, share the
  shards out: shard ``k`` falls to the ``k mod n``-th (:func:`assigned`);
- each replica takes the shards that fall to it once they are free, renews those it
  holds every third of their term, and lets go of one that falls to another live
  replica as soon as no round of its mirrors runs;
- a replica that takes a shard runs a full round of each of its mirrors (news sent to
  a holder that died is lost with it).

What the leases cost the table is per period, not per commit: ``SHARDS / (ttl / 3)``
renewals a second for the whole region, whatever the number of mirrors and commits.

A replica told of a move of a mirror whose shard it does not hold passes the news on
to the shard's holder. Where to reach a replica's API is part of its owner id
(``<name>@<address>``, :func:`owner_id`); the change feed's lease events say who holds
each shard.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime

from mirrors_db.errors import LeaseHeldError, MirrorsDatabaseError
from mirrors_db.models import ChangeEvent, Lease
from mirrors_db.table import MirrorsTable

log = logging.getLogger("replication.shards")

#: shards per region: as many replicas of a region can share its mirrors
SHARDS = 8


def shard_of(mirror_id: str) -> int:
    """The shard of a mirror."""
    return zlib.crc32(mirror_id.encode()) % SHARDS


def assigned(shard: int, owners: Iterable[str]) -> str:
    """The replica (owner id) that ``shard`` falls to among the live ``owners``."""
    ranked = sorted(set(owners))
    return ranked[shard % len(ranked)]


def owner_id(name: str, address: str | None) -> str:
    """A replica's owner id: its ``name``, and where the others reach its API."""
    return f"{name}@{address}" if address else name


def address_of(owner: str) -> str | None:
    """Where to reach the API of the replica ``owner`` (None if its id does not say)."""
    _, at, address = owner.rpartition("@")
    return address if at and address.startswith(("http://", "https://")) else None


class ShardKeeper:
    """The shards this replica holds, and who holds the others.

    Args:
        table: The mirrors table.
        organization_id: The organization.
        region: This region.
        owner: This replica's owner id.
        ttl: A shard lease's term (seconds); renewed every third of it.
        live: The owner ids of the other replicas of this region that live now.
        taken: Called with a shard this replica has just taken.
    """

    def __init__(self, table: MirrorsTable, organization_id: str, region: str, owner: str,
                 ttl: float, live: Callable[[], set[str]],
                 taken: Callable[[int], None]) -> None:
        self.table = table
        self.org = organization_id
        self.prefix = f"{region}/shard/"
        self.owner = owner
        self.ttl = ttl
        self.period = min(5.0, ttl / 3)
        self._live = live
        self._taken = taken
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: the shards held: their lease, and until when (monotonic) it surely holds
        self._held: dict[int, tuple[Lease, float]] = {}
        #: shards being let go: no new round of their mirrors begins
        self._leaving: set[int] = set()
        #: rounds running now, by shard
        self._rounds: dict[int, int] = {}
        #: who holds each shard, as the change feed (or a refused acquisition) told,
        #: and until when (monotonic)
        self._holders: dict[int, tuple[str, float]] = {}

    # ---------------------------------------------------------------- holding
    def run(self, stop: threading.Event) -> None:
        """Take, renew and let go of shards until ``stop``."""
        while not stop.is_set():
            try:
                self.keep()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("shards not kept")
            self._wake.wait(self.period)
            self._wake.clear()

    def keep(self) -> None:
        """One pass: let go of the shards that fall to another live replica, renew
        those held whose renewal is due, take those that fall to this one and are free."""
        now = time.monotonic()
        owners = self._live() | {self.owner}
        for shard in range(SHARDS):
            mine = assigned(shard, owners) == self.owner
            with self._lock:
                held = self._held.get(shard)
                if mine:
                    self._leaving.discard(shard)
                elif held is not None:
                    self._leaving.add(shard)
                    if self._rounds.get(shard):
                        continue  # let go once its rounds end
                    del self._held[shard]
                    self._leaving.discard(shard)
                holder = self._holders.get(shard)
            if held is not None and not mine:
                with contextlib.suppress(MirrorsDatabaseError):
                    self.table.release_lease(held[0])
            elif held is not None:
                if held[1] - now <= self.ttl * 2 / 3:
                    self._acquire(shard)
            elif (mine and (holder is None or holder[0] == self.owner or holder[1] <= now)
                  and self._acquire(shard)):
                self._taken(shard)

    def _acquire(self, shard: int) -> bool:
        """Take or renew ``shard``'s lease; whether this replica holds it now."""
        start = time.monotonic()
        try:
            lease = self.table.acquire_lease(self.org, self.prefix + str(shard),
                                             self.owner, self.ttl)
        except LeaseHeldError:
            with self._lock:
                self._held.pop(shard, None)
            with contextlib.suppress(MirrorsDatabaseError):
                other = self.table.get_lease(self.org, self.prefix + str(shard))
                if other is not None and other.owner != self.owner:
                    self._heard(shard, other)
            return False
        except MirrorsDatabaseError as e:
            log.warning("lease of shard %d: %s", shard, e)
            return False
        with self._lock:
            self._held[shard] = (lease, start + self.ttl)
            self._holders[shard] = (self.owner, start + self.ttl)
        return True

    def release_all(self) -> None:
        """Let go of every shard held (when this replica stops)."""
        with self._lock:
            held = [lease for lease, _ in self._held.values()]
            self._held.clear()
        for lease in held:
            with contextlib.suppress(MirrorsDatabaseError):
                self.table.release_lease(lease)

    def poke(self) -> None:
        """Run a pass now (the replicas or the holders changed)."""
        self._wake.set()

    # ----------------------------------------------------------------- rounds
    @contextlib.contextmanager
    def round(self, mirror_id: str) -> Iterator[bool]:
        """While a round of ``mirror_id`` runs: yields whether it may run here (this
        replica holds its shard, for half a term at least), and keeps the shard
        meanwhile."""
        shard = shard_of(mirror_id)
        with self._lock:
            held = self._held.get(shard)
            renew = held is not None and held[1] - time.monotonic() < self.ttl / 2
        if renew:
            self._acquire(shard)
        with self._lock:
            held = self._held.get(shard)
            ok = (held is not None and shard not in self._leaving
                  and held[1] - time.monotonic() >= self.ttl / 2)
            if ok:
                self._rounds[shard] = self._rounds.get(shard, 0) + 1
        try:
            yield ok
        finally:
            if ok:
                with self._lock:
                    self._rounds[shard] -= 1
                    leaving = shard in self._leaving and not self._rounds[shard]
                if leaving:
                    self.poke()

    def holds(self, shard: int) -> bool:
        """Whether this replica holds ``shard`` now."""
        with self._lock:
            held = self._held.get(shard)
            return held is not None and held[1] > time.monotonic()

    def held(self) -> list[int]:
        """The shards held now."""
        now = time.monotonic()
        with self._lock:
            return sorted(k for k, (_, until) in self._held.items() if until > now)

    # ---------------------------------------------------------------- holders
    def holder(self, mirror_id: str) -> str | None:
        """Who holds the shard of ``mirror_id`` (an owner id), if known and not expired."""
        with self._lock:
            holder = self._holders.get(shard_of(mirror_id))
        return holder[0] if holder is not None and holder[1] > time.monotonic() else None

    def changed(self, event: ChangeEvent) -> None:
        """A lease event of the change feed: a shard of this region taken, renewed or let go."""
        name = event.key[0]
        if not name.startswith(self.prefix):
            return
        try:
            shard = int(name[len(self.prefix):])
        except ValueError:
            return
        if event.deleted:
            with self._lock:
                holder = self._holders.get(shard)
                if holder is not None and holder[0] != self.owner:
                    del self._holders[shard]
            self.poke()  # free: its replica takes it now
        elif isinstance(event.row, Lease) and event.row.owner != self.owner:
            self._heard(shard, event.row)

    def _heard(self, shard: int, lease: Lease) -> None:
        left = (lease.expires_at - datetime.now(UTC)).total_seconds()
        with self._lock:
            self._holders[shard] = (lease.owner, time.monotonic() + left)
