"""Prometheus metrics of the sidecar (served at /metrics)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from mirrors_db.table import MirrorsTable


class ReplicationMetrics:
    """One registry per sidecar, so several sidecars can live in one test process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ("mirror", "branch")
        self.lag_seconds = Gauge(
            "replication_mirror_branch_lag_seconds",
            "Seconds since the destination last read the source branch's head and found "
            "the mirror branch serving it: a bound on what the mirror may be missing, "
            "growing while the source cannot be read", labels, registry=self.registry)
        self.source_unreadable = Gauge(
            "replication_mirror_source_unreadable",
            "1 while the mirror's last round could not read its source's heads "
            "(unreachable, refused, not found)", ("mirror",), registry=self.registry)
        self.pending_commits = Gauge(
            "replication_mirror_branch_pending_commits",
            "Commits on the source branch not yet promoted on the mirror", labels,
            registry=self.registry)
        self.missing_objects = Gauge(
            "replication_mirror_branch_missing_objects",
            "Objects the pending commit needs that are not in the destination yet", labels,
            registry=self.registry)
        self.validation_requests = Counter(
            "replication_validation_requests",
            "Requests made to the destination store to validate commits", ("mirror",),
            registry=self.registry)
        self.promotions = Counter(
            "replication_promotions",
            "Mirror branch and tag moves", ("mirror",), registry=self.registry)
        self.copied_objects = Counter(
            "replication_builtin_copied",
            "Objects and range files copied by the builtin copier", ("mirror",),
            registry=self.registry)
        self.passed_on = Counter(
            "replication_news_passed_on",
            "Source moves told to this replica and passed on to the replica of its region "
            "that holds the mirror's shard", registry=self.registry)
        self.shards_held = Gauge(
            "replication_shards_held",
            "Shards of this region's mirrors this replica holds (it runs their mirrors' "
            "rounds)", registry=self.registry)
        self.errors = Counter(
            "replication_errors", "Errors while processing mirrors", ("mirror",),
            registry=self.registry)
        self.permission_errors = Counter(
            "replication_permission_errors",
            "Source requests refused to the replication user (401/403), by the permission "
            "they need", ("mirror", "action"), registry=self.registry)
        self.range_cache_bytes = Gauge(
            "replication_range_cache_bytes",
            "Memory the parsed ranges kept by the validators hold (as they are weighed "
            "against validator.range_cache_size_bytes)", registry=self.registry)
        self.range_cache_max_bytes = Gauge(
            "replication_range_cache_max_bytes",
            "The bound on replication_range_cache_bytes (validator.range_cache_size_bytes)",
            registry=self.registry)
        group = ("group",)
        self.group_served_cut = Gauge(
            "replication_group_served_cut",
            "The cut every member branch of the mirror group serves in this region (0: none "
            "yet)", group, registry=self.registry)
        self.group_waiting_cut = Gauge(
            "replication_group_waiting_cut",
            "The newer cut of the group this region waits to complete (0: none)", group,
            registry=self.registry)
        self.group_lag_seconds = Gauge(
            "replication_group_lag_seconds",
            "Seconds since the source last read the group's member heads and found them at "
            "the cut served here (or since the served cut was read): a bound on what the "
            "members may be missing, growing while the source does not read them", group,
            registry=self.registry)
        self.group_source_unread = Gauge(
            "replication_group_source_unread",
            "1 while the source region has not read the group's member heads recently "
            "(its replication service is down or cut off): the group is never current then",
            group, registry=self.registry)
        self._group_gauges = (self.group_served_cut, self.group_waiting_cut,
                              self.group_lag_seconds, self.group_source_unread)
        self.table_requests = Counter(
            "replication_mirrors_table_requests",
            "Requests made of the mirrors table, by operation (the change feed's own "
            "reads not included)", ("operation",), registry=self.registry)
        self.source_requests = Gauge(
            "replication_source_requests",
            "Requests sent to a region's lakeFS API (retries included), by region",
            ("region",), registry=self.registry)
        self._branch_gauges = (self.lag_seconds, self.pending_commits, self.missing_objects)
        self._mirror_counters = (self.validation_requests, self.promotions,
                                 self.copied_objects, self.errors, self.source_unreadable)

    def forget_branch(self, mirror: str, branch: str) -> None:
        """Drop a branch's series (the branch is gone): series never outnumber branches."""
        for gauge in self._branch_gauges:
            gauge.remove(mirror, branch)

    def forget_mirror(self, mirror: str) -> None:
        """Drop every series of a mirror this sidecar no longer follows."""
        for metric in (*self._branch_gauges, *self._mirror_counters, self.permission_errors):
            metric.remove_by_labels({"mirror": mirror})

    def forget_group(self, group: str) -> None:
        """Drop every series of a group this region no longer follows."""
        for gauge in self._group_gauges:
            gauge.remove_by_labels({"group": group})


class CountingMirrorsTable:
    """The mirrors table, each request made of it counted by operation (the
    ``replication_mirrors_table_requests`` metric): what a sidecar costs the table is a
    figure to watch as mirrors are added."""

    def __init__(self, table: MirrorsTable, metrics: ReplicationMetrics) -> None:
        self._table = table
        self._counter = metrics.table_requests

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._table, name)
        if name.startswith("_") or name in _NOT_REQUESTS or not callable(attr):
            return attr
        counter = self._counter.labels(name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.inc()
            return attr(*args, **kwargs)

        return counted


#: methods of a mirrors table that send no request of their own
_NOT_REQUESTS = frozenset({"close", "watch"})
