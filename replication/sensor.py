"""The sensor of a destination region: every ``commit_sensor.process_branches_duration``,
one replica of the region (the holder of the lease ``<region>/sensor/<source region>``)
reads the heads of all its mirrors' sources in a source region at once, wakes the
mirrors that are behind them, and stores what it confirmed of the others in sensor
readings (docs/ARCHITECTURE.md, "Sensing, at any number of mirrors")."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import httpx

from lakefs_core.errors import LakeFSError
from mirrors_db.errors import LeaseHeldError, MirrorsDatabaseError
from mirrors_db.models import Lease, MirrorState, SensorReading, reading_pages
from replication.source import SourceError

if TYPE_CHECKING:
    from replication.sidecar import Sidecar

log = logging.getLogger("replication.sensor")


class RegionSensor:
    """The sensor of the mirrors a sidecar follows, one source region after another."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        #: source regions whose heads a sensor reads for all their mirrors at once (this
        #: replica's or another's, under the region's sensor lease): their idle mirrors
        #: run no round of their own until it finds them behind
        self.sensed_regions: set[str] = set()
        #: the sensor leases this replica holds, by source region
        self.leases: dict[str, Lease] = {}
        self._wake = threading.Event()

    def wake(self) -> None:
        """Read the heads now (a mirror of a region not sensed yet, or stopping)."""
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Read every source region's heads each period until ``stop``."""
        while not stop.is_set():
            due = time.monotonic() + self.sidecar.sense_interval
            regions = {m.source_region for m in list(self.sidecar.followed())}
            for region in sorted(regions):
                try:
                    self.sense_region(region)
                except (LakeFSError, MirrorsDatabaseError, httpx.HTTPError) as e:
                    log.warning("sensor of %s: %s", region, e)
                except Exception:  # noqa: BLE001 - the loop must survive anything
                    log.exception("sensor of %s failed", region)
            # a mirror of a region not sensed yet (the first ones, after a start) wakes it
            self._wake.wait(max(0.0, due - time.monotonic()))
            self._wake.clear()

    def sense_region(self, region: str) -> int:
        """Read the heads of every followed mirror's source in ``region`` at once (a
        request per :data:`~replication.source.HEADS_BATCH` repositories, to that
        region's replication service) and wake the mirrors that are behind them; the
        others are confirmed current as of that read, as their own round would.

        One replica of this region does it for all (the region's sensor lease); if the
        source region cannot answer, each mirror reads its own source again every
        ``commit_sensor.process_branches_duration``.

        Returns:
            The mirrors woken.
        """
        sidecar = self.sidecar
        mirrors = [m for m in sidecar.followed()
                   if m.source_region == region and m.state is MirrorState.ACTIVE]
        if not mirrors:
            return 0
        try:
            self.leases[region] = sidecar.table.acquire_lease(
                sidecar.org, f"{sidecar.region}/sensor/{region}", sidecar.owner,
                sidecar.lease_ttl)
        except LeaseHeldError:
            self.sensed_regions.add(region)  # another replica reads them
            return 0
        read_at = datetime.now(UTC)
        try:
            heads = sidecar.client_for(region).heads(
                sorted({m.source_repository for m in mirrors}))
        except SourceError as e:
            # not answered (an older version there, or unreachable): each mirror reads
            # its own source, and says so if it cannot
            log.warning("heads of %s's repositories not read: %s", region, e)
            self.sensed_regions.discard(region)
            for m in mirrors:
                sidecar.schedule(m.id)
            return len(mirrors)
        self.sensed_regions.add(region)
        woken = 0
        confirmed: dict[str, tuple[str, ...]] = {}
        for m in mirrors:
            branches = sidecar.quiet(m, heads.get(m.source_repository), read_at)
            if branches is None:
                sidecar.schedule(m.id)
                woken += 1
            elif branches:
                confirmed[m.id] = branches
        self._store_reading(region, read_at, confirmed)
        return woken

    def _store_reading(self, region: str, read_at: datetime,
                       confirmed: dict[str, tuple[str, ...]]) -> None:
        """Store what a reading of ``region``'s heads confirmed, a page per
        :data:`SENSOR_READING_PAGE` mirrors (or :data:`SENSOR_READING_BRANCHES`
        branches), and let their followers count their lag from it."""
        for page, part in enumerate(reading_pages(confirmed)):
            try:
                if not self.sidecar.table.put_sensor_reading(SensorReading(
                        self.sidecar.org, self.sidecar.region, region, page, read_at, part)):
                    continue  # another replica stored a later reading
            except MirrorsDatabaseError as e:
                log.warning("reading of %s's heads not stored: %s", region, e)
                continue
            for mirror_id, branches in part.items():
                follower = self.sidecar.follower(mirror_id)
                if follower is not None:
                    follower.confirmed_by_reading(branches, read_at)
