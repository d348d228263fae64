"""The replication sidecar: wiring, scheduling, the mirrors manager and events.

One sidecar runs beside each region's server. It plays both roles of replication
(docs/ARCHITECTURE.md, "The mirror lifecycle"):

- **source side** (mirrors whose source repository is in this region): when its
  server reports a branch or tag move, it tells the destination regions' sidecars at
  once (the fast path), through their servers' ``/service/replication/`` proxy;
- **destination side** (mirrors whose destination is this region): the mirrors
  manager creates and deletes mirror repositories as the table's state says (and
  deletes those of deleted mirrors that a replica re-created from a stale view); a
  pool of workers follows each active mirror of the shards this replica holds (see
  :mod:`replication.shards` and :mod:`replication.mirroring`): every
  ``commit_sensor.process_branches_duration`` at the latest and at once on an event
  (new source heads), at the validation runs (every ``validator.run_interval``) for
  heads waiting out a cooldown, and every ``validator.missing_recheck_interval``
  while pieces of a commit are missing. At most
  ``commit_sensor.branches_scanner_concurrency_limit`` workers read sources at once,
  and at most ``validator.num_workers`` validate at once.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import httpx

from lakefs_core.auth.service import AuthService, CachingAuthenticator
from lakefs_core.block.config import BlockstoresConfig
from lakefs_core.block.registry import BlockStores
from lakefs_core.config import DatabaseConfig
from lakefs_core.errors import (
    LakeFSError,
    StorageNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.mirror import MirrorService
from lakefs_core.graveler.presence import CountingStore, RequestTimes
from lakefs_core.graveler.ranges import RangeCache
from mirrors_db import open_mirrors_table
from mirrors_db.errors import (
    MirrorsDatabaseError,
    VersionConflictError,
)
from mirrors_db.models import (
    Mirror,
    MirrorState,
    RowKind,
    clip_error,
    default_lease_owner,
)
from mirrors_db.table import MirrorsTable
from replication.announcer import MoveAnnouncer
from replication.config import ReplicationConfig
from replication.copier import BuiltinCopier, CopySource
from replication.group_rounds import GroupRounds
from replication.groups import GroupCutter
from replication.lag_history import LagHistory
from replication.membership import Membership
from replication.metrics import CountingMirrorsTable, ReplicationMetrics
from replication.mirroring import (
    SOURCE_UNREADABLE,
    MirrorContext,
    MirrorFollower,
    SourceUnreadableError,
)
from replication.progress_cache import ProgressCache
from replication.progress_views import ProgressViews
from replication.remote_auth import RemoteAuthenticator
from replication.repositories import MirrorRepositories
from replication.sensor import RegionSensor
from replication.shards import ShardKeeper, address_of, owner_id, shard_of
from replication.source import SourceClient, SourceError, SourceForbiddenError, SourceHeads
from replication.source_index import SourceIndex

log = logging.getLogger("replication.sidecar")

#: seconds before a replica told of a move of a mirror whose shard it does not hold
#: looks again, while no replica holds the shard (or the holder passed the news back,
#: or could not be told)
LEASE_RETRY = 0.5
#: events one request may carry (each wakes at most the mirrors of one repository)
MAX_EVENTS = 100


def refstore_database(config: ReplicationConfig) -> DatabaseConfig:
    """The region's lakeFS database (``refstore_database``), checked for what the
    service opens in it: the refstore, and the auth store unless ``auth.api.endpoint``
    authenticates callers (on DynamoDB both are in the server's table).

    Raises:
        ValidationError: the block is absent or lacks what its type needs.
    """
    db = config.refstore_database
    if db is None:
        raise ValidationError(
            "refstore_database: required (the lakeFS installation's database; the Helm "
            "chart fills it in from the lakeFS config)")
    if db.type == "local" and not db.local.path:
        raise ValidationError("refstore_database.local.path: required")
    return db


@dataclass(order=True)
class _Due:
    at: float
    mirror_id: str


class Sidecar:
    """The sidecar of one region. ``start()`` runs it in background threads."""

    def __init__(self, config: ReplicationConfig, *, owner: str | None = None,
                 table: MirrorsTable | None = None) -> None:
        self.config = config
        self.region = config.region
        self.org = config.organization_id
        #: this replica's owner id in the leases it takes, and where to reach its API
        self.owner = owner_id(owner or f"{default_lease_owner()}:{uuid.uuid4().hex[:8]}",
                              config.own_address())
        self.metrics = ReplicationMetrics()
        database = refstore_database(config)
        with contextlib.ExitStack() as opened:  # a failure closes what opened before it
            self.blockstores = BlockStores.from_config(config.blockstore, config.blockstores)
            opened.callback(self.blockstores.close)
            #: the engine's mirroring interface over the region's refstore
            self.mirrors = MirrorService.open(database, self.blockstores.for_storage_id)
            opened.callback(self.mirrors.close)
            #: who a caller of the API is: this region's auth store, or another lakeFS
            #: (``auth.api.endpoint``), answers reused for a while with ``auth.cache``
            authenticator: AuthService | RemoteAuthenticator = (
                RemoteAuthenticator(config.auth.api.endpoint) if config.auth.api.endpoint
                else AuthService.open(database,
                                      config.auth.encrypt.secret_key.get_secret_value()))
            opened.callback(authenticator.close)
            cache = config.auth.cache
            self.auth: AuthService | RemoteAuthenticator | CachingAuthenticator = (
                CachingAuthenticator(authenticator, size=cache.size,
                                     ttl=cache.ttl.total_seconds())
                if cache.enabled else authenticator)
            self._table = table or open_mirrors_table(config.mirrors_database)
            opened.pop_all()
        #: the mirrors table, its requests counted
        self.table = cast(MirrorsTable, CountingMirrorsTable(self._table, self.metrics))
        self._own_table = table is None
        self._clients: dict[str, SourceClient] = {}
        self._source_stores: dict[str, BlockStores] = {}
        self._counting: dict[str, CountingStore] = {}
        builtin = config.object_replication.builtin
        validator = config.validator
        self.copier = (BuiltinCopier(concurrency=builtin.concurrency, retries=builtin.retries)
                       if config.object_replication.mode == "builtin" else None)
        #: the progress rows of the mirrors followed and sampled, kept by the change feed
        self.progress = ProgressCache(self.table, self.org, config.list_mirrors_page_size)
        lag = config.lag_history
        #: the recent lag of the mirrors of this region (as source or destination)
        self.lag_history = LagHistory(interval=lag.interval.total_seconds(),
                                      window=lag.window.total_seconds(),
                                      max_series=lag.max_series)
        #: the progress rows as views read them, and the lag history's samples of them
        self.views = ProgressViews(
            self.table, self.org, self.region, config.list_mirrors_page_size, self.progress,
            self.lag_history, config.commit_sensor.process_branches_duration.total_seconds())
        #: the groups whose destination is this region, and the branches they move
        self.groups = GroupRounds(self)
        self.ctx = MirrorContext(
            organization_id=self.org, table=self.table, mirrors=self.mirrors,
            metrics=self.metrics, source_client=self.client_for,
            copy_source_store=self._direct_copy_source, store_for=self._counting_store,
            builtin=self.copier,
            branch_page_size=config.commit_sensor.list_branch_page_size,
            log_page_size=config.commit_sensor.log_commit_page_size,
            run_interval=validator.run_interval.total_seconds(),
            cooldown_on_missing=validator.cooldown_on_missing.total_seconds(),
            cooldown_on_error=validator.cooldown_on_error.total_seconds(),
            recheck_interval=validator.missing_recheck_interval.total_seconds(),
            tags_retry=config.commit_sensor.process_branches_duration.total_seconds(),
            scan_slots=threading.BoundedSemaphore(
                config.commit_sensor.branches_scanner_concurrency_limit),
            validation_slots=threading.BoundedSemaphore(validator.num_workers),
            validation_concurrency=validator.request_concurrency,
            range_cache=RangeCache(max_bytes=validator.range_cache_size_bytes),
            grouped=self.groups.grouped_of,
            stored_progress=self.views.stored_progress,
            progress=self.progress,
        )
        #: the mirrors and groups whose source is this region, kept by the change feed
        self.source_index = SourceIndex(self.table, self.org, self.region,
                                        config.list_mirrors_page_size)
        self._source_index_retry = 0.0
        #: cuts of the groups whose source is this region
        self.group_cutter = GroupCutter(self.table, self.mirrors, self.org, self.region)
        ranges = self.ctx.range_cache
        self.metrics.range_cache_bytes.set_function(lambda: ranges.weight)
        self.metrics.range_cache_max_bytes.set(ranges.max_weight)
        #: rounds run at once: enough for every scan and every validation allowed
        self.workers = max(validator.num_workers,
                           config.commit_sensor.branches_scanner_concurrency_limit)
        self.sense_interval = config.commit_sensor.process_branches_duration.total_seconds()
        self.manage_interval = (
            config.mirrors_manager.process_mirrors_interval_duration.total_seconds())
        self.error_cooldown = config.validator.cooldown_on_error.total_seconds()
        #: a branch whose source head was not read for longer is stale (blind): twice
        #: the sensor's period, and a margin for a round that is slow to run
        self.stale_after = 2 * self.sense_interval + 10.0
        self.lease_ttl = max(10.0, 3 * min(self.sense_interval, self.manage_interval))
        #: the replicas of this region that live (see :mod:`replication.membership`)
        self.membership = Membership(self.table, self.org, self.region, self.owner,
                                     self.lease_ttl, lambda: self.shards.poke())
        #: the shards of this region's mirrors this replica follows
        self.shards = ShardKeeper(self.table, self.org, self.region, self.owner,
                                  self.lease_ttl, self.membership.live, self._shard_taken)
        self.metrics.shards_held.set_function(lambda: len(self.shards.held()))
        #: per mirror, the replica (owner id) that passed news of it on to this one
        self._passed: dict[str, str] = {}
        self._followers: dict[str, MirrorFollower] = {}
        self._mirrors: dict[str, Mirror] = {}
        self._heap: list[_Due] = []
        self._due: dict[str, float] = {}
        self._running: set[str] = set()
        #: mirrors whose next round reads their source (an event, a new mirror, a caller)
        self._wake: set[str] = set()
        #: per mirror, when (monotonic) its last round that read the source began
        self._sensed_at: dict[str, float] = {}
        #: reads the heads of the sources at once, a source region at a time
        self.sensor = RegionSensor(self)
        self._again: set[str] = set()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._clients_lock = threading.Lock()
        self._manager_wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._notify_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="notify")
        #: one pooled client for requests to the other regions' servers
        self.http = httpx.Client(timeout=5.0)
        #: tells other regions, and the other replicas of this one, of moves
        self.announcer = MoveAnnouncer(config, self.table, self.http, self._notify_pool,
                                       self.group_cutter, self.source_index, self.owner)
        self.last_errors: dict[str, str] = {}
        #: the mirror repositories of this region, created and deleted as rows say
        self.repositories = MirrorRepositories(
            self.table, self.org, self.region, self.mirrors, self.client_for, self.metrics,
            self._report, config.list_repositories_page_size)
        #: the mirrors whose destination is here, as the last mirrors-manager round
        #: listed them (every state)
        self._listed: dict[str, Mirror] = {}
        #: per mirror id, its branches' progress rows as the change feed last told them
        #: (what the lag history samples: reading them all again each time would cost
        #: a request per mirror per sample); empty while the feed is not open

    # ----------------------------------------------------------------- plumbing
    def client_for(self, region: str) -> SourceClient:
        with self._clients_lock:
            if self._stop.is_set():  # a round that outlived stop(): no client left open
                raise SourceError("the replication service is stopping")
            client = self._clients.get(region)
            if client is None:
                creds = self.config.source_lakefs
                client = SourceClient(self.config.endpoint_for(region),
                                      creds.access_key_id.get_secret_value(),
                                      creds.secret_access_key.get_secret_value())
                self._clients[region] = client
                self.metrics.source_requests.labels(region).set_function(
                    lambda: client.requests)
            return client

    def _counting_store(self, storage_id: str) -> CountingStore:
        store = self._counting.get(storage_id)
        if store is None:
            # listing pages and stats are timed per store, to weigh one against the other
            store = CountingStore(self.blockstores.for_storage_id(storage_id),
                                  times=RequestTimes())
            self._counting[storage_id] = store
        return store

    def _direct_copy_source(self, mirror: Mirror) -> CopySource | None:
        """A direct store-to-store source, when this sidecar can reach the source store."""
        cfg = self.config.object_replication.builtin.source_blockstores.get(
            mirror.source_region)
        if cfg is None:
            return None
        with self._clients_lock:  # one set of stores a region, closed by stop()
            if self._stop.is_set():
                raise SourceError("the replication service is stopping")
            stores = self._source_stores.get(mirror.source_region)
            if stores is None:
                stores = (BlockStores.from_config(None, cfg) if isinstance(cfg, BlockstoresConfig)
                          else BlockStores.from_config(cfg, None))
                self._source_stores[mirror.source_region] = stores
        client = self.client_for(mirror.source_region)
        repo = client.get_repository(mirror.source_repository)
        try:  # the source repository's own store, by its storage id there
            store = stores.for_storage_id(str(repo.get("storage_id") or ""))
        except StorageNotFoundError:
            return None  # not configured here: read through the source's API
        return CopySource(mirror.source_repository, "", client, store,
                          repo["storage_namespace"])

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        try:  # before any mirror round: a grouped branch never moves on its own
            self.groups.read_grouped()
        except MirrorsDatabaseError as e:
            log.warning("mirror groups not read yet: %s", e)
        stop = self._stop
        targets = [("mirrors-manager", self._manager_loop), ("watch", self._watch_loop),
                   ("groups", lambda: self.groups.run(stop)),
                   ("sensor", lambda: self.sensor.run(stop)),
                   ("membership", lambda: self.membership.run(stop)),
                   ("shards", lambda: self.shards.run(stop))]
        targets += [(f"mirror-worker-{i}", self._worker_loop) for i in range(self.workers)]
        if self.lag_history.interval > 0:
            targets.append(("lag-history", lambda: self.views.run(stop)))
        for name, target in targets:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self._manager_wake.set()
        self.shards.poke()  # each loop hears of the stop at once, not after its period
        self.groups.wake()
        self.sensor.wake()
        with self._cond:
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=10)
        self.shards.release_all()
        held = [*self.groups.leases.values(), *self.sensor.leases.values()]
        if self.membership.lease is not None:
            held.append(self.membership.lease)  # the others hear that this one stopped
        for lease in held:
            try:
                self.table.release_lease(lease)  # let another replica take over at once
            except MirrorsDatabaseError:
                pass
        # the notices being sent end (5 s at most) before their client closes: closing it
        # under a request leaves that request's connection open
        self._notify_pool.shutdown(wait=True, cancel_futures=True)
        self.http.close()
        if self.copier is not None:
            self.copier.close()
        with self._clients_lock:
            clients = list(self._clients.values())
            source_stores = list(self._source_stores.values())
        for client in clients:
            client.close()
        for stores in source_stores:
            stores.close()
        if self._own_table:
            self._table.close()
        self.auth.close()
        self.mirrors.close()
        self.blockstores.close()

    # -------------------------------------------------------------- scheduling
    def schedule(self, mirror_id: str, at: float | None = None, *, sense: bool = True) -> None:
        """Run a round of ``mirror_id`` at ``at`` (monotonic; now by default) or earlier.

        ``sense``: that round reads the source's refs (a full round); otherwise it may
        be a recheck round (see :meth:`MirrorFollower.process`), unless a full round is
        due by then (every ``commit_sensor.process_branches_duration``).
        """
        at = time.monotonic() if at is None else at
        with self._cond:
            if sense:
                self._wake.add(mirror_id)
            if mirror_id in self._running:
                if at <= time.monotonic():
                    self._again.add(mirror_id)  # run again right after this round
                return
            current = self._due.get(mirror_id)
            if current is not None and current <= at:
                return
            self._due[mirror_id] = at
            heapq.heappush(self._heap, _Due(at, mirror_id))
            self._cond.notify()

    def _next(self) -> str | None:
        with self._cond:
            while not self._stop.is_set():
                now = time.monotonic()
                while self._heap and self._due.get(self._heap[0].mirror_id) != self._heap[0].at:
                    heapq.heappop(self._heap)  # superseded by an earlier schedule
                if self._heap and self._heap[0].at <= now:
                    item = heapq.heappop(self._heap)
                    del self._due[item.mirror_id]
                    if item.mirror_id in self._running:  # the sensor is looking at it
                        self._again.add(item.mirror_id)
                        continue
                    self._running.add(item.mirror_id)
                    return item.mirror_id
                timeout = (self._heap[0].at - now) if self._heap else 1.0
                self._cond.wait(timeout=max(0.005, min(timeout, 1.0)))
        return None

    def _worker_loop(self) -> None:
        while not self._stop.is_set():
            mirror_id = self._next()
            if mirror_id is None:
                return
            next_at: float | None = None
            try:
                next_at = self._process(mirror_id)
            finally:
                with self._cond:
                    self._running.discard(mirror_id)
                    again = mirror_id in self._again
                    self._again.discard(mirror_id)
            mirror = self._mirrors.get(mirror_id)
            if mirror is None:
                continue
            if next_at is None and not again and mirror.source_region in self.sensor.sensed_regions:
                continue  # idle: the region's sensor wakes it when its source moves
            now = time.monotonic()
            fallback = max(now, self._sensed_at.get(mirror_id, now) + self.sense_interval)
            self.schedule(mirror_id, now if again else min(next_at or fallback, fallback),
                          sense=False)

    def followed(self) -> list[Mirror]:
        """The mirrors this sidecar follows now (active or not)."""
        return list(self._mirrors.values())

    def follower(self, mirror_id: str) -> MirrorFollower | None:
        """The follower of a mirror, if it has one here."""
        return self._followers.get(mirror_id)

    def quiet(self, mirror: Mirror, refs: SourceHeads | None,
               read_at: datetime) -> tuple[str, ...] | None:
        """The branches a reading of the source's heads ``refs`` confirms, if the
        mirror is at them; None if it is not (or may not be: a round is due)."""
        if refs is None:
            return None
        if mirror.id not in self._followers:
            # followed by another replica: confirmed from here all the same (its rows as
            # the feed keeps them), rather than by a round of each such mirror
            try:
                new = MirrorFollower(self.ctx, mirror)
            except (LakeFSError, MirrorsDatabaseError) as e:
                log.debug("mirror %s not confirmed: %s", mirror.id, e)
                return None
            with self._cond:
                followed = mirror.id in self._mirrors
                if followed:
                    self._followers.setdefault(mirror.id, new)
            if not followed:  # unfollowed since the reading began
                self._drop_if_unfollowed(mirror)
                return None
        with self._cond:
            follower = self._followers.get(mirror.id)
            if (follower is None or mirror.id in self._running
                    or mirror.id in self.last_errors
                    or mirror.error.startswith(SOURCE_UNREADABLE)):
                return None  # a round says what is wrong, or sees the move after it
            self._running.add(mirror.id)  # no round meanwhile
        try:
            return follower.quiet(refs.branches, refs.tags, read_at)
        except (LakeFSError, MirrorsDatabaseError) as e:
            log.debug("mirror %s not confirmed: %s", mirror.id, e)
            return None
        finally:
            with self._cond:
                self._running.discard(mirror.id)
                again = mirror.id in self._again
                self._again.discard(mirror.id)
            self._drop_if_unfollowed(mirror)
            if again:
                self.schedule(mirror.id)

    def _process(self, mirror_id: str) -> float | None:
        mirror = self._mirrors.get(mirror_id)
        if mirror is None or mirror.state is not MirrorState.ACTIVE:
            return None
        try:
            return self._round(mirror_id, mirror)
        finally:
            self._drop_if_unfollowed(mirror)

    def _drop_if_unfollowed(self, mirror: Mirror) -> None:
        """After a round or a confirmation of ``mirror``: if the mirror stopped being
        followed meanwhile (deleted, detached), drop what it made again (its follower,
        its series), as :meth:`_unfollow` did before it ended."""
        with self._cond:
            if mirror.id in self._mirrors:
                return
            self._followers.pop(mirror.id, None)
        self.last_errors.pop(mirror.id, None)
        self.metrics.forget_mirror(mirror.name)

    def _round(self, mirror_id: str, mirror: Mirror) -> float | None:
        now = time.monotonic()
        follower = self._followers.get(mirror_id)
        with self._cond:
            woken = mirror_id in self._wake
        if (not woken and follower is not None and not follower.refs
                and mirror_id not in self.last_errors
                and mirror.source_region in self.sensor.sensed_regions):
            return None  # idle, and its region's sensor reads its source: it wakes it
        with self.shards.round(mirror_id) as here:
            if not here:
                return self._elsewhere(mirror_id, now)
            return self._held_round(mirror_id, mirror, now)

    def _elsewhere(self, mirror_id: str, now: float) -> float | None:
        """A round of a mirror whose shard this replica does not hold: news of a move
        goes to the shard's holder. Returns when to look again (while no replica
        holds the shard, or while this one was just told of it by the holder)."""
        with self._cond:
            if mirror_id not in self._wake:
                return None  # its holder follows it
            holder = self.shards.holder(mirror_id)
            passed_by = self._passed.pop(mirror_id, None)
            if holder is None or holder == self.owner or holder == passed_by:
                # free, or about to be taken here, or the holder thinks this one holds
                # it (one of the two has not heard of the other's lease yet)
                return now + LEASE_RETRY
            self._wake.discard(mirror_id)
        self.last_errors.pop(mirror_id, None)  # its holder reports them now
        address = address_of(holder)
        if address is not None:
            self._notify_pool.submit(self._pass_on, address, mirror_id)
        return None  # its holder's own rounds (and the region's sensor) see the move

    def _pass_on(self, address: str, mirror_id: str) -> None:
        """Tell the replica at ``address`` that ``mirror_id``'s source moved; if it
        cannot be told, this one asks again soon (the shard moves once it is gone)."""
        if self.announcer.pass_on(address, mirror_id):
            self.metrics.passed_on.inc()
        elif not self._stop.is_set():
            self.schedule(mirror_id, time.monotonic() + LEASE_RETRY)

    def _shard_taken(self, shard: int) -> None:
        """This replica took ``shard``: a full round of each of its mirrors, as news sent
        to the replica that held it before may be lost."""
        for mirror_id in [m for m in list(self._mirrors) if shard_of(m) == shard]:
            self.schedule(mirror_id)

    def _held_round(self, mirror_id: str, mirror: Mirror, now: float) -> float | None:
        with self._cond:
            self._passed.pop(mirror_id, None)  # told by another replica: heard here
        try:
            follower = self._followers.get(mirror_id)
            if follower is None or follower.mirror.storage_namespace != mirror.storage_namespace:
                follower = MirrorFollower(self.ctx, mirror)  # its store may be missing here
                with self._cond:
                    followed = mirror_id in self._mirrors
                    if followed:
                        self._followers[mirror_id] = follower
                if not followed:  # unfollowed since the round began
                    self._drop_if_unfollowed(mirror)
                    return None
            with self._cond:
                sense = (mirror_id in self._wake or not follower.refs
                         or now >= self._sensed_at.get(mirror_id, -math.inf)
                         + self.sense_interval)
                self._wake.discard(mirror_id)
            if sense:
                self._sensed_at[mirror_id] = now
            result = follower.process(sense=sense)
        except Exception as e:  # noqa: BLE001 - a worker must survive any mirror's failure
            self.metrics.errors.labels(mirror.name).inc()
            self.metrics.source_unreadable.labels(mirror.name).set(
                isinstance(e, SourceUnreadableError))
            self.last_errors[mirror_id] = str(e)
            if isinstance(e, SourceForbiddenError):
                self.metrics.permission_errors.labels(mirror.name, e.action).inc()
            if isinstance(e, LakeFSError | httpx.HTTPError | OSError):
                log.warning("mirror %s (%s): %s", mirror.id, mirror.name, e)
            else:
                log.exception("mirror %s (%s) failed", mirror.id, mirror.name)
            self._report(mirror, str(e))
            return time.monotonic() + min(self.error_cooldown, self.sense_interval)
        self.last_errors.pop(mirror_id, None)
        self.metrics.source_unreadable.labels(mirror.name).set(0)
        self._report(mirror, follower.notice)
        return result

    def _report(self, mirror: Mirror, text: str) -> Mirror:
        """Show what keeps a mirror from being created or from following its source in
        its row, so every region's status view says it ("" once nothing does).

        Returns:
            The mirror as stored now.
        """
        text = clip_error(text)  # as the table stores it
        if mirror.error == text or mirror.state not in (MirrorState.CREATING,
                                                        MirrorState.ACTIVE):
            return mirror
        try:
            updated = self.table.update_mirror(mirror.with_state(mirror.state, text))
        except (MirrorsDatabaseError, LakeFSError) as e:  # a newer row wins; next round
            log.debug("mirror %s: error not recorded: %s", mirror.id, e)
            return mirror
        with self._cond:
            if mirror.id in self._mirrors:
                self._mirrors[mirror.id] = updated
        return updated

    # ------------------------------------------------------------ the manager
    def _manager_loop(self) -> None:
        next_sweep = 0.0
        while not self._stop.is_set():
            try:
                self.reconcile()
                if time.monotonic() >= next_sweep:  # not on every wake: it lists them all
                    next_sweep = time.monotonic() + self.manage_interval
                    self.sweep_repositories()
            except (LakeFSError, httpx.HTTPError) as e:
                log.warning("mirrors manager round: %s", e)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("mirrors manager round failed")
            self._manager_wake.wait(timeout=self.manage_interval)
            self._manager_wake.clear()

    def _my_mirrors(self) -> Iterable[Mirror]:
        token: str | None = None
        while True:
            page = self.table.list_mirrors_by_destination(
                self.org, self.region, page_token=token,
                page_size=self.config.list_mirrors_page_size)
            yield from page.mirrors
            if not page.next_page_token:
                return
            token = page.next_page_token

    def reconcile(self) -> None:
        """One mirrors-manager round: act on every mirror whose destination is here."""
        seen: set[str] = set()
        groups_read = False
        listed: dict[str, Mirror] = {}
        for mirror in self._my_mirrors():
            seen.add(mirror.id)
            mirror = listed[mirror.id] = self.repositories.manage(mirror)
            if mirror.state is MirrorState.ACTIVE:
                new = mirror.id not in self._mirrors
                if new and not groups_read:
                    # a group formed before its mirrors (a handover's reverse group) moves
                    # their branches from their first round
                    self.groups.read_grouped()
                    groups_read = True
                self._mirrors[mirror.id] = mirror
                if new:
                    self.schedule(mirror.id)
                    if mirror.source_region not in self.sensor.sensed_regions:
                        self.sensor.wake()
            else:
                self._unfollow(mirror.id)
        for gone in set(self._mirrors) - seen:
            self._unfollow(gone)
        self._listed = listed

    def _unfollow(self, mirror_id: str) -> None:
        """Stop following a mirror, dropping all this sidecar kept for it."""
        with self._cond:
            mirror = self._mirrors.pop(mirror_id, None)
            self._followers.pop(mirror_id, None)
        self.last_errors.pop(mirror_id, None)
        if mirror is not None:
            self.metrics.forget_mirror(mirror.name)

    def sweep_repositories(self) -> list[str]:
        """Delete this region's mirror repositories whose mirror is deleted (see
        :meth:`MirrorRepositories.sweep`); returns them."""
        return self.repositories.sweep(self._listed)

    # --------------------------------------------------------------- events
    def _watch_loop(self) -> None:
        """Mirror rows changing anywhere wake the manager, groups and their cuts the
        groups' round (the table's change feed)."""
        kinds = frozenset({RowKind.MIRROR, RowKind.GROUP, RowKind.CUT, RowKind.BRANCH,
                           RowKind.LEASE})
        while not self._stop.is_set():
            try:
                feed = self.table.watch(self.org, kinds, poll_interval=0.2)
            except MirrorsDatabaseError as e:
                log.warning("change feed unavailable: %s", e)
                self._stop.wait(self.manage_interval)
                continue
            with feed:
                self.progress.feed_opened()
                while not self._stop.is_set():
                    event = feed.get(timeout=0.5)
                    if event is not None:
                        if event.kind is RowKind.MIRROR:
                            self._manager_wake.set()
                            self.source_index.on_event(event)
                        elif event.kind is RowKind.BRANCH:
                            self.progress.changed(event)
                        elif event.kind is RowKind.LEASE:
                            self.membership.changed(event)
                            self.shards.changed(event)
                        else:
                            self.groups.wake()
                            self.source_index.on_event(event)
                    if feed.closed:
                        break
                    if not self.source_index.loaded:
                        self._load_source_index()
                self.progress.feed_closed()
                self.source_index.forget()

    def _load_source_index(self) -> None:
        """Read the source index whole (at most every few seconds, while it fails)."""
        if time.monotonic() < self._source_index_retry:
            return
        try:
            self.source_index.load()
        except MirrorsDatabaseError as e:
            log.warning("mirrors of this region's repositories not read: %s", e)
            self._source_index_retry = time.monotonic() + self.error_cooldown

    def on_ref_events(self, events: list[dict], source_region: str | None,
                      mirrors: Iterable[str] = (), passed_from: str | None = None) -> int:
        """Handle ref-move events, and ``mirrors`` whose news another replica of this
        region (``passed_from``) passed on; returns how many mirrors were woken or told."""
        passed = 0
        for mirror_id in mirrors:
            if mirror_id in self._mirrors:
                with self._cond:
                    if passed_from:
                        self._passed[mirror_id] = passed_from
                self.schedule(mirror_id)
                passed += 1
        if not events:
            return passed
        repos = {e.get("repository", "") for e in events if e.get("repository")}
        if source_region is not None:
            # forwarded by a source region: wake our mirrors of those repositories
            n = 0
            for mirror in list(self._mirrors.values()):
                if (mirror.source_region == source_region
                        and mirror.source_repository in repos):
                    self.schedule(mirror.id)
                    n += 1
            if n == 0:
                self._manager_wake.set()  # maybe a mirror we do not know yet
            return n
        return self.announcer.announce(repos)

    # --------------------------------------------------------------- failover
    def detach(self, mirror: Mirror) -> Mirror:
        """Turn a mirror into an ordinary writable repository at its last consistent heads.

        Replication of it stops for good. The mirror row ends ``detached`` (a normal end
        state: deleting the mirror afterwards leaves the detached repository alone).
        """
        self._unfollow(mirror.id)
        self.mirrors.mark_detached(mirror.name, mirror.id)
        self.mirrors.detach(mirror.name)
        current = mirror
        for _ in range(10):
            try:
                return self.table.update_mirror(current.with_state(MirrorState.DETACHED))
            except VersionConflictError:
                # a round that was under way recorded an error on the row meanwhile
                current = self.table.get_mirror(self.org, mirror.id)
                if current.state is MirrorState.DETACHED:
                    return current
        raise VersionConflictError(f"mirror {mirror.id}: its row kept changing while it "
                                   "was detached; detach it again")


#: the error text with which an earlier version recorded a detached mirror (``failed``)
LEGACY_DETACHED = "detached"


def shown_state(mirror: Mirror) -> MirrorState:
    """The mirror's state as clients see it: a row an earlier version left ``failed``
    with the error ``detached`` reads as ``detached``."""
    if mirror.state is MirrorState.FAILED and mirror.error == LEGACY_DETACHED:
        return MirrorState.DETACHED
    return mirror.state
