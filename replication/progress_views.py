"""The mirrors' progress as every view reads it: the branch progress rows with what
the sensors' stored readings confirm of them, and the lag history's samples of them."""

from __future__ import annotations

import logging
import math
import threading
import time

from lakefs_core.errors import LakeFSError
from mirrors_db.errors import MirrorsDatabaseError
from mirrors_db.models import Mirror, MirrorBranch, MirrorState
from mirrors_db.table import MirrorsTable
from replication.freshness import Confirmations
from replication.lag_history import LagHistory, branch_lag
from replication.progress_cache import ProgressCache

log = logging.getLogger("replication.progress_views")

#: seconds after which the lag history reads the mirrors' progress rows again, rather
#: than only trusting the change feed to have told every change
PROGRESS_REREAD = 600.0


class ProgressViews:
    """The progress rows of the mirrors of one region, as views read them.

    Args:
        table: The mirrors table.
        organization_id: The organization.
        region: This region: the mirrors sampled are those whose source or destination
            it is.
        page_size: Page size of the table's listings.
        progress: The rows kept by the change feed.
        lag_history: Where the samples go.
        sense_interval: How long the sensors' readings are reused for new followers.
    """

    def __init__(self, table: MirrorsTable, organization_id: str, region: str,
                 page_size: int, progress: ProgressCache, lag_history: LagHistory,
                 sense_interval: float) -> None:
        self.table = table
        self.org = organization_id
        self.region = region
        self.page_size = page_size
        self.progress = progress
        self.lag_history = lag_history
        self.sense_interval = sense_interval
        self._lock = threading.Lock()
        #: the sensors' readings as last read for starting followers, and when (monotonic)
        self._confirmations: tuple[float, Confirmations] = (-math.inf, Confirmations())
        #: when (monotonic) the lag history last read every progress row
        self._progress_read_at = 0.0

    def run(self, stop: threading.Event) -> None:
        """Sample the lag every ``lag_history.interval`` until ``stop``."""
        while not stop.wait(self.lag_history.interval):
            try:
                self.sample_lag()
            except (LakeFSError, MirrorsDatabaseError) as e:
                log.warning("lag history: %s", e)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("lag history round failed")

    def sample_lag(self) -> int:
        """Record the lag of every branch of the active mirrors whose source or
        destination is this region, from the mirrors table.

        While the change feed is open, the rows are read once and then kept current by
        the feed (read again every :data:`PROGRESS_REREAD` seconds, in case it missed a
        change); without it, they are all read at every sample. A reading of all of
        them is a listing of the organization's rows, a request per page; a mirror
        that appears in between is read on its own, unless so many do that the listing
        costs fewer requests.

        Returns:
            The branches sampled.
        """
        now = time.time()
        reread = (not self.progress.feed_open
                  or time.monotonic() >= self._progress_read_at + PROGRESS_REREAD)
        if reread:
            self._progress_read_at = time.monotonic()
        mirrors: list[Mirror] = []
        token: str | None = None
        while True:
            page = self.table.list_mirrors(self.org, page_token=token,
                                           page_size=self.page_size)
            mirrors += [m for m in page.mirrors if m.state is MirrorState.ACTIVE
                        and self.region in (m.source_region, m.destination_region)]
            if not page.next_page_token:
                break
            token = page.next_page_token
        sampled = {m.id for m in mirrors}
        self.progress.keep_only(sampled)
        # many mirrors new since the last sample (created in bulk, or a sidecar that
        # starts): one listing of every row costs fewer requests than a read of each
        reread = reread or (self.progress.unkept(sampled)
                            > 1 + len(sampled) // self.page_size)
        read = self.progress.read_all(sorted(sampled)) if reread and mirrors else {}
        confirmations = self.confirmations()
        n = 0
        for m in mirrors:
            rows = read.get(m.id)
            for p in self.progress.rows(m.id) if rows is None else rows:
                p = confirmations.apply(p)
                self.lag_history.record(m.id, p.branch, now, branch_lag(p, now))
                n += 1
        self.lag_history.forget(sampled)
        return n

    def confirmations(self) -> Confirmations:
        """What the sensors' stored readings confirm (one request or a few)."""
        return Confirmations(self.table.list_sensor_readings(self.org))

    def branch_progress(self, mirror_id: str,
                        confirmations: Confirmations | None = None) -> list[MirrorBranch]:
        """The mirror's branch progress rows as stored, each with what the sensors'
        readings (``confirmations``, read now if not given) confirm of it."""
        rows = self.table.list_branch_progress(self.org, mirror_id)
        if not rows:
            return rows
        confirmations = self.confirmations() if confirmations is None else confirmations
        return [confirmations.apply(p) for p in rows]

    def stored_progress(self, mirror_id: str) -> list[MirrorBranch]:
        """A new follower's rows, with the readings' confirmations: read once a sensor
        period, however many followers start (a restarted sidecar starts them all)."""
        rows = self.progress.rows(mirror_id)
        now = time.monotonic()
        with self._lock:
            read_at, confirmations = self._confirmations
        if rows and now >= read_at + self.sense_interval:
            confirmations = self.confirmations()
            with self._lock:
                self._confirmations = (now, confirmations)
        return [confirmations.apply(p) for p in rows]
