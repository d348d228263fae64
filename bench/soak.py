"""Soak of mirroring: hours of steady commits, watching lag, memory, rows and files.

Run ``python -m bench.soak --minutes 30 [--window 300] [--commit-interval 10]``.

Two regions of real processes on loopback (``e2e.cluster``): a server and a
replication service each, S3 on a moto server per region, the mirrors table on
DynamoDB (moto), the sidecars acting as the replication user with seed 003's narrow
policy, ``object_replication.mode: native``. Nothing copies objects between the
regions but :class:`~lakefs_testing.replicator.LateCopies`, standing in for S3
replication: every object of a commit (data, ranges, metarange) is copied after a
random delay (so out of order), some attempts are put off, some copies made twice.

The workload commits ``--objects`` objects (paths drawn from ``--paths``, so the
repository stops growing after a while and only its history does) to ``main`` every
``--commit-interval`` seconds; every ``--branch-every`` commits it creates a branch
``job-<n>`` at ``main`` and deletes the one made before it (branches come and go, as
with one branch per job). It stops by itself after ``--minutes``.

Every ``--window`` seconds it prints: the mirror lag of ``main`` (from a commit
returning to the mirror branch reaching it or a later commit) as p50/p99, beside it the
lag from the commit's last copy landing (its last object, range or metarange file: what
the sidecar adds to the replication's own delay), the object
copies the stand-in replication still owes (on a busy machine it falls behind, and the
lag with it: no mirror can be ahead of its objects), the RSS
and open file descriptors of each server and replication service, the refstore's
rows per table in each region, the mirrors table's rows per kind and the sidecars'
metric series. At the end it prints a verdict (:func:`verdict`): whether lag drifted,
memory growth after the warm-up (goal at most 10 %), and whether any rows, files or
series grew beyond what the history needs (``commits`` and ``present_commits`` grow
with the commits made; nothing else may).

Every commit writes new ranges, which the server and the sidecar keep in memory up to
their range cache bound: a process grows until that bound is full and stays there.
The soak bounds them at ``--range-cache-mb`` (16 MB), which its commits fill within
the warm-up, so that growth after it is what nothing bounds; with the defaults
(200 MB, ``--range-cache-mb 0``) small commits take hours to fill them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import psutil

from e2e.api import ApiError, RegionClient
from e2e.cluster import AWS_ENV, Cluster, ClusterSpec, scratch_dir, start_cluster
from lakefs_testing.replicator import LateCopies

SOURCE_REPO = "src"
MIRROR_REPO = "src-mirror"
#: refstore tables whose rows are the history itself: they grow with the commits made
HISTORY_TABLES = frozenset({"commits", "present_commits"})
#: rows a bounded table may differ by between samples (a job branch being replaced)
ROW_SLACK = 2
#: open files a process may gain after the warm-up (pooled connections come and go)
FD_SLACK = 8
#: metric series a sidecar may gain after the warm-up (a job branch being replaced)
SERIES_SLACK = 8
#: memory growth after the warm-up that the soak accepts
MEMORY_GOAL = 0.10


# ------------------------------------------------------------------------- samples
@dataclass
class Sample:
    """What one look at the deployment saw."""

    at: float  #: seconds since the start
    commits: int  #: commits made so far on main
    rss: dict[str, int]  #: process -> resident bytes
    fds: dict[str, int]  #: process -> open file descriptors
    rows: dict[str, dict[str, int]]  #: region -> refstore table -> rows
    mirrors_rows: dict[str, int]  #: mirrors-table row kind -> rows
    series: dict[str, int]  #: sidecar -> metric series it exports
    load: float  #: the machine's 1-minute load average
    copies_waiting: int = 0  #: object copies the stand-in for S3 replication owes
    #: sidecar -> bytes its validators' range cache holds (-1: not read)
    range_cache: dict[str, int] = field(default_factory=dict)


@dataclass
class Window:
    """One reporting window."""

    index: int
    start: float
    end: float
    lags: list[float] = field(default_factory=list)
    #: lags from each commit's last copy landing (the commits whose copies all landed)
    copy_lags: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)

    def p(self, q: float) -> float | None:
        return percentile(self.lags, q) if self.lags else None

    def copy_p(self, q: float) -> float | None:
        return percentile(self.copy_lags, q) if self.copy_lags else None


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _processes(cluster: Cluster) -> dict[str, int]:
    """Our own processes (servers and sidecars) by name -> pid."""
    out = {}
    for region in cluster.regions.values():
        for p in region.processes:
            if p.pid is not None:
                out[p.name] = p.pid
    return out


def _refstore_rows(path: Path) -> dict[str, int]:
    """Rows per table of a region's SQLite refstore (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])
                for t in sorted(tables)}
    finally:
        conn.close()


def _mirrors_rows(cluster: Cluster) -> dict[str, int]:
    """Rows of the DynamoDB mirrors table by kind (the prefix of their sort key)."""
    import boto3

    cfg = cluster.mirrors_database["dynamodb"]
    client = boto3.client("dynamodb", endpoint_url=cfg["endpoint_url"],
                          region_name=cfg["aws_region"],
                          aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"])
    counts: dict[str, int] = {}
    for page in client.get_paginator("scan").paginate(TableName=cfg["table_name"],
                                                      ProjectionExpression="row_id"):
        for item in page.get("Items", ()):
            kind = item.get("row_id", {}).get("S", "?").split("#", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def _metrics(endpoint: str) -> tuple[int, int]:
    """How many metric series a sidecar exports (grows with label sets), and the bytes
    its range cache holds (``replication_range_cache_bytes``); -1 for what it did not
    answer."""
    try:
        text = httpx.get(f"{endpoint}/metrics", timeout=5).text
    except httpx.HTTPError:
        return -1, -1
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    cached = next((int(float(line.split()[1])) for line in lines
                   if line.startswith("replication_range_cache_bytes ")), -1)
    return len(lines), cached


def take_sample(cluster: Cluster, started: float, commits: int) -> Sample:
    rss, fds = {}, {}
    for name, pid in _processes(cluster).items():
        try:
            proc = psutil.Process(pid)
            rss[name] = proc.memory_info().rss
            fds[name] = proc.num_fds()
        except psutil.Error:
            rss[name] = fds[name] = -1
    rows = {r.name: _refstore_rows(r.root / "metadata.db") for r in cluster.regions.values()}
    metrics = {f"{r.name}-sidecar-0": _metrics(r.sidecar_endpoint()) for r in
               cluster.regions.values()}
    return Sample(at=time.monotonic() - started, commits=commits, rss=rss, fds=fds, rows=rows,
                  mirrors_rows=_mirrors_rows(cluster),
                  series={p: m[0] for p, m in metrics.items()},
                  load=os.getloadavg()[0],
                  range_cache={p: m[1] for p, m in metrics.items()})


# ------------------------------------------------------------------------ workload
class Replication:
    """Late, reordered copies of the source namespace's new objects into the mirror's."""

    def __init__(self, cluster: Cluster, src_ns: str, dst_ns: str, *, seed: int,
                 max_delay: float) -> None:
        self.src = cluster.s3_client("east")
        self.dst = cluster.s3_client("west")
        self.src_bucket, _, self.src_prefix = src_ns.removeprefix("s3://").partition("/")
        self.dst_bucket, _, self.dst_prefix = dst_ns.removeprefix("s3://").partition("/")
        self.copies = LateCopies(self._copy, seed=seed, max_delay=max_delay, threads=4)
        #: metadata files (``_lakefs/...``) already handed to the copier
        self._metadata: set[str] = set()
        self._lock = threading.Lock()
        #: files handed to the copier that have not landed yet
        self._waiting: set[str] = set()
        #: per commit (its copies' tracker), the files it waits for
        self._trackers: list[CommitCopies] = []

    def _copy(self, rel: str) -> None:
        body = self.src.get_object(Bucket=self.src_bucket,
                                   Key=f"{self.src_prefix}/{rel}")["Body"].read()
        self.dst.put_object(Bucket=self.dst_bucket, Key=f"{self.dst_prefix}/{rel}", Body=body)
        now = time.monotonic()
        with self._lock:
            self._waiting.discard(rel)
            for t in self._trackers:
                t.waiting.discard(rel)
                if not t.waiting and t.landed_at is None:
                    t.landed_at = now
            self._trackers = [t for t in self._trackers if t.landed_at is None]

    def _submit(self, rels: list[str]) -> None:
        with self._lock:
            self._waiting.update(rels)
        self.copies.submit(rels)

    def data_written(self, physical_addresses: list[str]) -> None:
        prefix = f"s3://{self.src_bucket}/{self.src_prefix}/"
        self._submit([a.removeprefix(prefix) for a in physical_addresses])

    def committed(self) -> CommitCopies:
        """Copy the range and metarange files the commit wrote (listed: few, immutable).

        Returns:
            The tracker of the commit's copies: the files not landed yet (its own, and
            those of earlier commits still on their way, which it may share), and when
            the last of them landed.
        """
        new = []
        paginator = self.src.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.src_bucket,
                                       Prefix=f"{self.src_prefix}/_lakefs/"):
            for obj in page.get("Contents", ()):
                rel = obj["Key"][len(self.src_prefix) + 1:]
                if rel not in self._metadata:
                    self._metadata.add(rel)
                    new.append(rel)
        with self._lock:
            tracker = CommitCopies(set(self._waiting) | set(new))
            if tracker.waiting:
                self._trackers.append(tracker)
            else:
                tracker.landed_at = time.monotonic()
        self._submit(new)
        return tracker


@dataclass
class CommitCopies:
    """The copies a commit waits for, and when its last one landed."""

    waiting: set[str]
    landed_at: float | None = None


class LagWatch:
    """Polls the mirror's ``main`` and notes when each source commit became visible."""

    def __init__(self, west: RegionClient, interval: float = 0.2) -> None:
        self.west = west
        self.interval = interval
        self._lock = threading.Lock()
        #: (commit id, committed at, its copies), oldest first
        self._pending: list[tuple[str, float, CommitCopies | None]] = []
        #: (mirrored at, lag) per commit
        self.lags: list[tuple[float, float]] = []
        #: (mirrored at, lag from its last copy landing) per commit whose copies landed
        self.copy_lags: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-watch", daemon=True)
        self._thread.start()

    def committed(self, commit_id: str, at: float,
                  copies: CommitCopies | None = None) -> None:
        with self._lock:
            self._pending.append((commit_id, at, copies))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                head = self.west.request(
                    "GET", f"/api/v1/repositories/{MIRROR_REPO}/branches/main",
                    expect=(200, 404)).json().get("commit_id")
            except (ApiError, httpx.HTTPError):
                continue
            now = time.monotonic()
            with self._lock:
                ids = [c for c, _, _ in self._pending]
                if head in ids:
                    n = ids.index(head) + 1
                    self.lags += [(now, now - at) for _, at, _ in self._pending[:n]]
                    self.copy_lags += [(now, max(0.0, now - c.landed_at))
                                       for _, _, c in self._pending[:n]
                                       if c is not None and c.landed_at is not None]
                    del self._pending[:n]

    @property
    def behind(self) -> int:
        with self._lock:
            return len(self._pending)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


# ---------------------------------------------------------------------- the soak
@dataclass
class SoakOptions:
    minutes: float = 30.0
    window: float = 300.0
    warmup: float | None = None  #: seconds; one window by default
    commit_interval: float = 10.0
    objects: int = 100
    paths: int = 2000
    branch_every: int = 5
    max_copy_delay: float = 3.0
    sample_every: float = 30.0
    interval: str = "5s"
    seed: int = 0
    #: the servers' and sidecars' bound on parsed ranges in memory (None: the default)
    range_cache_mb: float | None = 16.0


@dataclass
class SoakResult:
    options: SoakOptions
    windows: list[Window]
    commits: int
    mirrored: int
    copies: int
    copy_errors: int
    verdict: dict[str, Any]


def run_soak(opts: SoakOptions, root: Path, *, out: Any = print) -> SoakResult:
    """Run the soak in ``root``; prints a report per window and the verdict."""
    spec = ClusterSpec(mirrors_db="dynamodb", storage="s3", replication="native",
                       policy="narrow", interval=opts.interval, log_level="WARNING",
                       source_repository=SOURCE_REPO, mirror_repository=MIRROR_REPO,
                       range_cache_bytes=None if opts.range_cache_mb is None
                       else int(opts.range_cache_mb * 1_000_000))
    rng = random.Random(opts.seed)
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(start_cluster(root, spec))
        east = stack.enter_context(cluster.east.client(timeout=60))
        west = stack.enter_context(cluster.west.client(timeout=60))
        src_ns = cluster.east.namespace(SOURCE_REPO)
        dst_ns = cluster.west.namespace(MIRROR_REPO)
        east.create_repository(SOURCE_REPO, src_ns)
        replication = Replication(cluster, src_ns, dst_ns, seed=opts.seed,
                                  max_delay=opts.max_copy_delay)
        stack.callback(replication.copies.stop)
        replication.committed()
        east.create_mirror(SOURCE_REPO, MIRROR_REPO, "west", dst_ns)
        watch = LagWatch(west)
        stack.callback(watch.stop)
        pool = stack.enter_context(ThreadPoolExecutor(4, thread_name_prefix="upload"))
        out(f"soak: {opts.minutes:g} min, {opts.objects} objects per commit every "
            f"{opts.commit_interval:g} s, windows of {opts.window:g} s; {spec.describe()}; "
            "range caches "
            + ("at their defaults" if opts.range_cache_mb is None
               else f"bounded at {opts.range_cache_mb:g} MB") + f"; data in {root}")
        started = time.monotonic()
        end = started + opts.minutes * 60
        windows: list[Window] = []
        window = Window(0, 0.0, opts.window)
        commits = 0
        next_sample = started
        jobs: list[str] = []
        for _ in _ticks(started, opts.commit_interval, end):
            bodies = {i: f"{commits}:{i}:".encode() + rng.randbytes(rng.randrange(64, 4096))
                      for i in rng.sample(range(opts.paths), min(opts.objects, opts.paths))}

            def put(item: tuple[int, bytes]) -> str:
                stat = east.upload(SOURCE_REPO, "main", f"data/part-{item[0]:05d}.bin", item[1])
                return str(stat["physical_address"])

            replication.data_written(list(pool.map(put, bodies.items())))
            head = east.commit(SOURCE_REPO, "main", f"soak commit {commits}")
            committed_at = time.monotonic()
            watch.committed(head, committed_at, replication.committed())
            commits += 1
            if opts.branch_every and commits % opts.branch_every == 0:
                name = f"job-{commits}"
                east.create_branch(SOURCE_REPO, name, "main")
                jobs.append(name)
                if len(jobs) > 1:
                    east.delete_branch(SOURCE_REPO, jobs.pop(0))
            now = time.monotonic()
            if now >= next_sample:
                window.samples.append(replace(take_sample(cluster, started, commits),
                                              copies_waiting=replication.copies.pending))
                next_sample = now + opts.sample_every
            if now - started >= window.end:
                window.samples.append(replace(take_sample(cluster, started, commits),
                                              copies_waiting=replication.copies.pending))
                _close(window, watch, started)
                out(report_window(window))
                windows.append(window)
                window = Window(window.index + 1, window.end, window.end + opts.window)
        # the tail: let the mirror catch up (bounded), then the last window
        deadline = time.monotonic() + max(30.0, 4 * opts.max_copy_delay)
        while watch.behind and time.monotonic() < deadline:
            time.sleep(0.2)
        window.samples.append(replace(take_sample(cluster, started, commits),
                                      copies_waiting=replication.copies.pending))
        window.end = time.monotonic() - started
        _close(window, watch, started, last=True)
        if window.lags or len(window.samples) > 1 or not windows:
            out(report_window(window))
            windows.append(window)
        warmup = opts.window if opts.warmup is None else opts.warmup
        v = verdict(windows, warmup)
        result = SoakResult(opts, windows, commits, len(watch.lags), replication.copies.copied,
                            replication.copies.errors, v)
        out(report_verdict(result))
        return result


def _ticks(started: float, interval: float, end: float) -> Iterator[float]:
    """Commit times every ``interval`` from ``started`` until ``end`` (a late commit does
    not make the next ones hurry)."""
    t = started
    while t < end:
        yield t
        t = max(t + interval, time.monotonic())
        if t >= end:
            return
        time.sleep(max(0.0, t - time.monotonic()))


def _close(window: Window, watch: LagWatch, started: float, *, last: bool = False) -> None:
    """Give the window the lags of the commits mirrored within it (the last window:
    and after it)."""
    lo, hi = started + window.start, started + window.end
    window.lags = [lag for at, lag in list(watch.lags) if lo <= at and (last or at < hi)]
    window.copy_lags = [lag for at, lag in list(watch.copy_lags)
                        if lo <= at and (last or at < hi)]


# ------------------------------------------------------------------------ verdict
def _last(window: Window) -> Sample:
    return window.samples[-1]


def verdict(windows: list[Window], warmup: float) -> dict[str, Any]:
    """Judge the run from its windows: lag drift, memory, rows, files and series.

    The baseline is the last sample of the warm-up (the first ``warmup`` seconds; the
    first sample when the run is shorter). Rows are judged at the last sample, open
    files and metric series at the least the last window saw, memory at the most any
    sample after the baseline saw.
    """
    samples = [s for w in windows for s in w.samples]
    base = next((s for s in reversed(samples) if s.at <= warmup), samples[0])
    last = samples[-1]
    commits = last.commits - base.commits
    # rows: a history table holds at most a row per commit made (and the first); the
    # others do not grow
    row_growth: dict[str, int] = {}
    rows_ok = True
    for region, tables in last.rows.items():
        for table, n in tables.items():
            grown = n - base.rows.get(region, {}).get(table, 0)
            row_growth[f"{region}.{table}"] = grown
            rows_ok &= (n <= last.commits + 1 + ROW_SLACK if table in HISTORY_TABLES
                        else grown <= ROW_SLACK)
    mirrors_growth = {k: n - base.mirrors_rows.get(k, 0) for k, n in last.mirrors_rows.items()}
    mirrors_ok = all(g <= ROW_SLACK for g in mirrors_growth.values())
    # files and series: the least the last window saw (pooled connections come and go;
    # a leak never goes down)
    tail = [s for s in windows[-1].samples if s.at > base.at] or [last]
    fd_growth = {p: min(s.fds.get(p, n) for s in tail) - base.fds.get(p, n)
                 for p, n in last.fds.items()}
    fds_ok = all(g <= FD_SLACK for g in fd_growth.values())
    series_growth = {p: min(s.series.get(p, n) for s in tail) - base.series.get(p, n)
                     for p, n in last.series.items()}
    series_ok = all(g <= SERIES_SLACK for g in series_growth.values())
    # memory: the last window's peak against the warm-up's last sample
    after = [s for s in samples if s.at > base.at] or [last]
    memory_growth = {p: max(s.rss.get(p, 0) for s in after) / base.rss[p] - 1
                     for p in last.rss if base.rss.get(p, 0) > 0}
    memory_ok = all(g <= MEMORY_GOAL for g in memory_growth.values())
    # the sidecars' range caches (bounded): what they held at the baseline and at most
    # after it, for telling a cache still filling from memory that nothing bounds
    range_cache = {p: (n, max(s.range_cache.get(p, -1) for s in after))
                   for p, n in base.range_cache.items()}
    # lag: the median of the last window with lags against the first after the warm-up
    lagged = [w for w in windows if w.lags]
    steady = [w for w in lagged if w.start >= warmup] or lagged
    first_p50 = statistics.median(steady[0].lags) if steady else None
    last_p50 = statistics.median(steady[-1].lags) if steady else None
    lag_drift = (None if first_p50 is None or last_p50 is None else last_p50 - first_p50)
    # a window after the warm-up in which commits were made and none reached the mirror
    # has a lag longer than itself: a stall, whatever the medians say
    stalled = [w.index for w in windows if w.start >= warmup and not w.lags
               and _last(w).commits > w.samples[0].commits]
    lag_ok = not stalled and (lag_drift is None
                              or lag_drift <= max(1.0, 0.5 * (first_p50 or 0.0)))
    return {
        "commits_after_warmup": commits,
        "lag_p50_first_s": first_p50, "lag_p50_last_s": last_p50, "lag_drift_s": lag_drift,
        # what the sidecar adds: from each commit's last copy landing to the mirror
        "copy_lag_p50_s": _median([x for w in steady for x in w.copy_lags]),
        "copy_lag_p99_s": _p99([x for w in steady for x in w.copy_lags]),
        "stalled_windows": stalled, "lag_ok": lag_ok,
        # copies the stand-in replication owed then: a backlog there delays any mirror
        "copies_waiting_first": _last(steady[0]).copies_waiting if steady else None,
        "copies_waiting_last": _last(steady[-1]).copies_waiting if steady else None,
        "memory_growth": memory_growth, "memory_ok": memory_ok,
        "row_growth": row_growth, "rows_ok": rows_ok,
        "mirrors_row_growth": mirrors_growth, "mirrors_rows_ok": mirrors_ok,
        "fd_growth": fd_growth, "fds_ok": fds_ok,
        "series_growth": series_growth, "series_ok": series_ok,
        "range_cache_base_and_peak": range_cache,
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _p99(values: list[float]) -> float | None:
    return percentile(values, 99) if values else None


# ------------------------------------------------------------------------- report
def _mib(n: int) -> str:
    return f"{n / 2**20:.0f}"


def report_window(w: Window) -> str:
    s = _last(w)
    p50, p99 = w.p(50), w.p(99)
    c50, c99 = w.copy_p(50), w.copy_p(99)
    lag = (f"lag p50 {p50:.2f} s p99 {p99:.2f} s over {len(w.lags)} commits"
           if p50 is not None and p99 is not None else "no commit mirrored")
    if c50 is not None and c99 is not None:
        lag += f" (from the last copy: p50 {c50:.2f} s p99 {c99:.2f} s)"
    lines = [f"[window {w.index}: {w.start:.0f}-{w.end:.0f} s] commits {s.commits}, {lag}, "
             f"load {s.load:.1f}, object copies waiting {s.copies_waiting}"]
    lines.append("  RSS MiB: " + ", ".join(f"{p} {_mib(n)}" for p, n in s.rss.items()))
    lines.append("  open fds: " + ", ".join(f"{p} {n}" for p, n in s.fds.items()))
    for region, tables in s.rows.items():
        lines.append(f"  refstore {region}: " + ", ".join(
            f"{t} {n}" for t, n in tables.items() if n))
    lines.append("  mirrors table: " + ", ".join(f"{k} {n}" for k, n in s.mirrors_rows.items()))
    lines.append("  metric series: " + ", ".join(f"{p} {n}" for p, n in s.series.items()))
    lines.append("  range cache MB (most in the window): " + ", ".join(
        f"{p} {max(x.range_cache.get(p, -1) for x in w.samples) / 1e6:.1f}"
        for p in s.range_cache))
    return "\n".join(lines)


def report_verdict(r: SoakResult) -> str:
    v = r.verdict

    def ok(flag: bool) -> str:
        return "ok" if flag else "FAIL"

    def s(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    grown = {k: g for k, g in v["row_growth"].items() if g}
    return "\n".join([
        f"verdict: {r.commits} commits, {r.mirrored} seen on the mirror, {r.copies} object "
        f"copies ({r.copy_errors} failed and retried)",
        f"  lag p50 first {s(v['lag_p50_first_s'])} s, last {s(v['lag_p50_last_s'])} s, "
        f"drift {s(v['lag_drift_s'])} s (object copies owed at those windows' ends: "
        f"{v['copies_waiting_first']}, {v['copies_waiting_last']}), windows without any "
        f"commit mirrored: {v['stalled_windows'] or 'none'}: {ok(v['lag_ok'])}",
        f"  lag from each commit's last copy after warm-up: p50 {s(v['copy_lag_p50_s'])} s, "
        f"p99 {s(v['copy_lag_p99_s'])} s",
        "  memory growth after warm-up: " + ", ".join(
            f"{p} {g:+.1%}" for p, g in v["memory_growth"].items())
        + f" (goal <= {MEMORY_GOAL:.0%}): {ok(v['memory_ok'])}",
        "  range caches, MB at the warm-up's end -> most after it: " + ", ".join(
            f"{p} {a / 1e6:.1f} -> {b / 1e6:.1f}"
            for p, (a, b) in v["range_cache_base_and_peak"].items()),
        f"  refstore rows grown ({v['commits_after_warmup']} commits after warm-up; only "
        f"{', '.join(sorted(HISTORY_TABLES))} may follow the commits): "
        + (", ".join(f"{k} {g:+d}" for k, g in grown.items()) or "none")
        + f": {ok(v['rows_ok'])}",
        "  mirrors table rows grown: " + ", ".join(
            f"{k} {g:+d}" for k, g in v["mirrors_row_growth"].items())
        + f": {ok(v['mirrors_rows_ok'])}",
        "  open fds grown: " + ", ".join(f"{p} {g:+d}" for p, g in v["fd_growth"].items())
        + f": {ok(v['fds_ok'])}",
        "  metric series grown: " + ", ".join(f"{p} {g:+d}" for p, g in
                                             v["series_growth"].items())
        + f": {ok(v['series_ok'])}",
    ])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to commit")
    ap.add_argument("--window", type=float, default=300.0, help="seconds per report window")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before the baseline of the verdict (default: one window)")
    ap.add_argument("--commit-interval", type=float, default=10.0,
                    help="seconds between commits")
    ap.add_argument("--objects", type=int, default=100, help="objects per commit")
    ap.add_argument("--paths", type=int, default=2000, help="paths the objects are drawn from")
    ap.add_argument("--branch-every", type=int, default=5,
                    help="replace the job branch every N commits (0: never)")
    ap.add_argument("--max-copy-delay", type=float, default=3.0,
                    help="seconds an object copy may be late")
    ap.add_argument("--sample-every", type=float, default=30.0,
                    help="seconds between looks at memory, files and rows")
    ap.add_argument("--interval", default="5s", help="the sidecars' sensing interval")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--range-cache-mb", type=float, default=16.0,
                    help="bound on the parsed ranges each server and replication service "
                         "keeps in memory (committed.sstable.memory.cache_size_bytes, "
                         "validator.range_cache_size_bytes); 0: their defaults (200 MB), "
                         "which a soak of small commits fills only after hours")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the data, configs and logs in this directory")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    opts = SoakOptions(minutes=args.minutes, window=args.window, warmup=args.warmup,
                       commit_interval=args.commit_interval, objects=args.objects,
                       paths=args.paths, branch_every=args.branch_every,
                       max_copy_delay=args.max_copy_delay, sample_every=args.sample_every,
                       interval=args.interval, seed=args.seed,
                       range_cache_mb=args.range_cache_mb or None)
    with scratch_dir(args.keep, prefix="lakefs-soak-") as root:
        result = run_soak(opts, root, out=lambda text: print(text, flush=True))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=1, default=str))


if __name__ == "__main__":
    main()
