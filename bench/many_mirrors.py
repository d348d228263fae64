"""Many mirrors per sidecar: what following N mirrors costs the destination sidecar.

Run ``python -m bench.many_mirrors [--mirrors 10,100,1000] [--seconds 60] [--rate 10]
[--replicas 1]``; quick: ``--mirrors 10 --seconds 20``.

For each mirror count N it starts two regions of real processes on loopback
(``e2e.cluster``: a server and ``--replicas`` replication services per region, local
storage, the mirrors table on SQLite, ``object_replication.mode: native``, the
replication user with seed 003's broad policy, the sensor on ``--interval``, the
seed's default), creates N source repositories in ``east`` with a mirror each in
``west``, waits until every mirror serves its source's head, then commits ``--rate``
times a second for ``--seconds``, each commit (two small objects) on a repository drawn
at random. Nothing copies objects between the regions but
:class:`~lakefs_testing.replicator.LateCopies`, standing in for S3 replication: every
file of a commit (objects, ranges, metarange) lands after a random delay of up to
``--max-copy-delay`` seconds.

It prints, per N:

- promotion after each commit's last copy (the mirror branch reaching the commit or a
  later one, read from the destination's refstore every 20 ms), p50/p99; goal: p99 at
  most 1 s;
- the destination sidecars' CPU (cores, over the run) and peak RSS; goal: under one
  core and 1 GiB;
- mirrors-table requests (every sidecar of both regions, from their
  ``replication_mirrors_table_requests`` metric) and source requests (the destination
  sidecars' requests to the source server, ``replication_source_requests``) per commit
  made in the run, and per second; goal: flat in N.

Commits that reached the mirror before their last copy landed would break the
mirror's promise; the bench counts them (``early``), expecting none.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from e2e.api import RegionClient
from e2e.cluster import Cluster, ClusterSpec, Region, scratch_dir, start_cluster
from lakefs_testing.replicator import LateCopies

#: seconds between two reads of the mirrors' heads
WATCH_INTERVAL = 0.02
#: the goals of issue 35
LAG_P99_GOAL = 1.0
CPU_GOAL = 1.0
RSS_GOAL = 1 << 30


@dataclass
class Options:
    mirrors: int = 10
    seconds: float = 20.0
    rate: float = 10.0
    replicas: int = 1
    interval: str = "1m"
    max_copy_delay: float = 1.0
    seed: int = 0
    setup_concurrency: int = 8


@dataclass
class CommitTrack:
    repo: str
    commit_id: str
    committed_at: float
    waiting: set[str]  #: copies not landed yet
    last_copy_at: float | None = None
    promoted_at: float | None = None


@dataclass
class Result:
    options: Options
    commits: int
    promoted: int
    early: int
    lag_from_copy: list[float]
    lag_from_commit: list[float]
    wall: float
    #: destination sidecar -> cores used over the run, peak RSS bytes
    cpu: dict[str, float]
    rss: dict[str, int]
    table_requests: dict[str, float]  #: operation -> requests (every sidecar)
    source_requests: float
    #: destination replica -> promotions it made in the run
    promotions: dict[str, float] = field(default_factory=dict)
    setup_seconds: float = 0.0

    @property
    def table_total(self) -> float:
        return sum(self.table_requests.values())


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def read_counters(endpoint: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A sidecar's samples by (name, labels); empty when it does not answer."""
    try:
        text = httpx.get(f"{endpoint}/metrics", timeout=10).text
    except httpx.HTTPError:
        return {}
    return {(s.name, tuple(sorted(s.labels.items()))): float(s.value)
            for family in text_string_to_metric_families(text) for s in family.samples}


class Copies:
    """Late copies of the source namespaces' new files into their mirrors' namespaces,
    noting when each commit's last copy lands."""

    def __init__(self, cluster: Cluster, *, seed: int, max_delay: float) -> None:
        self.src_root = cluster.east.blockstore_root
        self.dst_root = cluster.west.blockstore_root
        self._lock = threading.Lock()
        self._known: dict[str, set[str]] = {}  #: repo -> metadata files handed over
        self._of_key: dict[str, CommitTrack] = {}
        self.late = LateCopies(self._copy, seed=seed, max_delay=max_delay, threads=4)

    def _copy(self, key: str) -> None:
        repo, rel = key.split("\t", 1)
        dst = self.dst_root / f"{repo}-m" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.parent / f".tmp-copy-{threading.get_ident()}"
        shutil.copyfile(self.src_root / repo / rel, tmp)
        os.replace(tmp, dst)
        now = time.monotonic()
        with self._lock:
            track = self._of_key.pop(key, None)
            if track is not None:
                track.waiting.discard(key)
                if not track.waiting:
                    track.last_copy_at = now

    def new_metadata(self, repo: str) -> list[str]:
        """The range and metarange files of ``repo`` not handed over yet."""
        known = self._known.setdefault(repo, set())
        meta = self.src_root / repo / "_lakefs"
        new = [f"_lakefs/{p.name}" for p in meta.iterdir()
               if p.is_file() and f"_lakefs/{p.name}" not in known] if meta.is_dir() else []
        known.update(new)
        return new

    def now(self, repo: str, rels: list[str]) -> None:
        """Copy at once (the setup)."""
        for rel in rels:
            self._copy(f"{repo}\t{rel}")

    def later(self, track: CommitTrack, rels: list[str]) -> None:
        keys = [f"{track.repo}\t{rel}" for rel in rels]
        with self._lock:
            track.waiting.update(keys)
            for key in keys:
                self._of_key[key] = track
            if not keys:
                track.last_copy_at = track.committed_at
        self.late.submit(keys)


class HeadWatch:
    """Reads the mirrors' ``main`` heads from the destination's refstore and notes when
    each commit (or a later one of its repository) got there."""

    def __init__(self, west: Region) -> None:
        self.db = west.root / "metadata.db"
        self._lock = threading.Lock()
        self.pending: dict[str, list[CommitTrack]] = {}  #: repo -> commits, oldest first
        self.early = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="head-watch", daemon=True)

    def heads(self, repos: list[str] | None = None) -> dict[str, str]:
        """Mirror repository (source name) -> head of ``main``."""
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        try:
            sql = "SELECT repo, commit_id FROM branches WHERE name = 'main'"
            if repos is None:
                rows = conn.execute(sql).fetchall()
            else:
                marks = ",".join("?" * len(repos))
                rows = conn.execute(f"{sql} AND repo IN ({marks})",
                                    [f"{r}-m" for r in repos]).fetchall()
        finally:
            conn.close()
        return {str(r).removesuffix("-m"): str(c) for r, c in rows}

    def start(self) -> None:
        self._thread.start()

    def add(self, track: CommitTrack) -> None:
        with self._lock:
            self.pending.setdefault(track.repo, []).append(track)

    @property
    def behind(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.pending.values())

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            with self._lock:
                repos = list(self.pending)
            if not repos:
                continue
            try:
                heads = self.heads(repos)
            except sqlite3.Error:
                continue
            now = time.monotonic()
            with self._lock:
                for repo, head in heads.items():
                    tracks = self.pending.get(repo, [])
                    ids = [t.commit_id for t in tracks]
                    if head not in ids:
                        continue
                    reached = tracks[:ids.index(head) + 1]
                    for t in reached:
                        t.promoted_at = now
                    if reached[-1].last_copy_at is None:
                        self.early += 1  # served before all of it was there
                    del tracks[:len(reached)]
                    if not tracks:
                        del self.pending[repo]

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def _wait(what: str, done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"many_mirrors: {what} not done within {timeout:.0f} s")
        time.sleep(0.2)


def _ticks(rate: float, seconds: float) -> Iterator[float]:
    start = time.monotonic()
    n = 0
    while True:
        at = start + n / rate
        if at - start >= seconds:
            return
        time.sleep(max(0.0, at - time.monotonic()))
        yield at
        n += 1


def run(opts: Options, root: Path, *, out: Callable[[str], object] = print) -> Result:
    spec = ClusterSpec(mirrors_db="sqlite", storage="local", replication="native",
                       policy="broad", interval=opts.interval, log_level="WARNING",
                       sidecars_per_region=opts.replicas)
    rng = random.Random(opts.seed)
    repos = [f"r{i:04d}" for i in range(opts.mirrors)]
    with contextlib.ExitStack() as stack:
        setup_started = time.monotonic()
        cluster = stack.enter_context(start_cluster(root, spec))
        east: RegionClient = stack.enter_context(cluster.east.client(timeout=120))
        copies = Copies(cluster, seed=opts.seed, max_delay=opts.max_copy_delay)
        stack.callback(copies.late.stop)
        watch = HeadWatch(cluster.west)
        stack.callback(watch.stop)
        pool = stack.enter_context(ThreadPoolExecutor(opts.setup_concurrency,
                                                      thread_name_prefix="setup"))

        def prepare(repo: str) -> str:
            east.create_repository(repo, cluster.east.namespace(repo))
            copies.now(repo, copies.new_metadata(repo))
            east.create_mirror(repo, f"{repo}-m", "west", cluster.west.namespace(f"{repo}-m"))
            return str(east.branches(repo)["main"])

        sources = dict(zip(repos, pool.map(prepare, repos), strict=True))

        def caught_up() -> bool:
            heads = watch.heads()
            return all(heads.get(r) == h for r, h in sources.items())

        _wait(f"{opts.mirrors} mirrors caught up", caught_up, 60 + opts.mirrors * 0.5)
        setup = time.monotonic() - setup_started
        out(f"many_mirrors: {opts.mirrors} mirrors ready in {setup:.0f} s; "
            f"{opts.rate:g} commits/s for {opts.seconds:g} s, copies up to "
            f"{opts.max_copy_delay:g} s late; {spec.describe()}, sensor {opts.interval}")
        watch.start()
        west_sidecars = [(p.name, p.pid, cluster.west.sidecar_endpoint(i))
                         for i, p in enumerate(cluster.west.sidecars)]
        all_sidecars = [r.sidecar_endpoint(i) for r in cluster.regions.values()
                        for i in range(len(r.sidecars))]
        procs = {name: psutil.Process(pid) for name, pid, _ in west_sidecars if pid}
        cpu0 = {n: sum(p.cpu_times()[:2]) for n, p in procs.items()}
        rss_peak = {n: p.memory_info().rss for n, p in procs.items()}
        before = [read_counters(e) for e in all_sidecars]
        west_before = [read_counters(e) for _, _, e in west_sidecars]
        started = time.monotonic()
        tracks: list[CommitTrack] = []
        commit_lock = threading.Lock()
        repo_locks = {r: threading.Lock() for r in repos}

        def one_commit(repo: str, n: int) -> None:
            with repo_locks[repo]:  # copies of a repository's files are handed over in order
                rels = []
                for i in range(2):
                    stat = east.upload(repo, "main", f"data/{n}-{i}.bin",
                                       f"{n}:{i}:".encode() + os.urandom(64 + 64 * i))
                    rels.append(str(stat["physical_address"]).removeprefix(f"local://{repo}/"))
                head = east.commit(repo, "main", f"commit {n}")
                track = CommitTrack(repo, head, time.monotonic(), set())
                watch.add(track)
                copies.later(track, rels + copies.new_metadata(repo))
            with commit_lock:
                tracks.append(track)

        futures = []
        sample_at = time.monotonic()
        for n, _ in enumerate(_ticks(opts.rate, opts.seconds)):
            futures.append(pool.submit(one_commit, rng.choice(repos), n))
            if time.monotonic() >= sample_at:
                sample_at += 1.0
                for name, p in procs.items():
                    with contextlib.suppress(psutil.Error):
                        rss_peak[name] = max(rss_peak[name], p.memory_info().rss)
        for f in futures:
            f.result()
        tail_end = time.monotonic() + 30 + 4 * opts.max_copy_delay
        while watch.behind and time.monotonic() < tail_end:
            time.sleep(0.2)
            for name, p in procs.items():
                with contextlib.suppress(psutil.Error):
                    rss_peak[name] = max(rss_peak[name], p.memory_info().rss)
        wall = time.monotonic() - started
        cpu = {n: (sum(p.cpu_times()[:2]) - cpu0[n]) / wall for n, p in procs.items()}
        after = [read_counters(e) for e in all_sidecars]
        west_after = [read_counters(e) for _, _, e in west_sidecars]
    table: dict[str, float] = {}
    for b, a in zip(before, after, strict=True):
        for (name, labels), v in a.items():
            if name == "replication_mirrors_table_requests_total":
                op = dict(labels)["operation"]
                table[op] = table.get(op, 0.0) + v - b.get((name, labels), 0.0)
    source = 0.0
    promotions: dict[str, float] = {}
    for (name, _, _), b, a in zip(west_sidecars, west_before, west_after, strict=True):
        key = ("replication_source_requests", (("region", "east"),))
        source += a.get(key, 0.0) - b.get(key, 0.0)
        promotions[name] = sum(v - b.get(k, 0.0) for k, v in a.items()
                               if k[0] == "replication_promotions_total")
    done = [t for t in tracks if t.promoted_at is not None and t.last_copy_at is not None]
    return Result(
        options=opts, commits=len(tracks), promoted=len(done), early=watch.early,
        lag_from_copy=[max(0.0, t.promoted_at - t.last_copy_at) for t in done  # type: ignore[operator]
                       ],
        lag_from_commit=[t.promoted_at - t.committed_at for t in done],  # type: ignore[operator]
        wall=wall, cpu=cpu, rss=rss_peak, table_requests=table, source_requests=source,
        promotions=promotions, setup_seconds=setup)


def report(r: Result) -> str:
    def pct(values: list[float], q: float) -> str:
        return f"{percentile(values, q):.3f}" if values else "-"

    per = max(1, r.commits)
    ops = sorted(r.table_requests.items(), key=lambda kv: -kv[1])
    lines = [
        f"N={r.options.mirrors} replicas={r.options.replicas}: {r.commits} commits, "
        f"{r.promoted} promoted, {r.early} promoted before their last copy",
        f"  promotion after last copy: p50 {pct(r.lag_from_copy, 50)} s, "
        f"p99 {pct(r.lag_from_copy, 99)} s (goal p99 <= {LAG_P99_GOAL:g} s); from commit: "
        f"p50 {pct(r.lag_from_commit, 50)} s, p99 {pct(r.lag_from_commit, 99)} s",
        "  destination sidecars: " + ", ".join(
            f"{n} CPU {r.cpu[n]:.2f} cores, RSS peak {r.rss[n] / 2**20:.0f} MiB, "
            f"{r.promotions.get(n, 0):.0f} promotions" for n in r.cpu)
        + f" (goal < {CPU_GOAL:g} core, < {RSS_GOAL >> 20} MiB)",
        f"  per commit: mirrors-table requests {r.table_total / per:.1f}, source requests "
        f"{r.source_requests / per:.1f}; per second: {r.table_total / r.wall:.1f} and "
        f"{r.source_requests / r.wall:.1f}",
        "  mirrors-table requests by operation: " + ", ".join(
            f"{op} {n / per:.2f}" for op, n in ops if n),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.many_mirrors",
                                 description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--mirrors", default="10,100,1000",
                    help="mirror counts, comma-separated (default: %(default)s)")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of commits")
    ap.add_argument("--rate", type=float, default=10.0, help="commits a second")
    ap.add_argument("--replicas", type=int, default=1, help="replication services per region")
    ap.add_argument("--interval", default="1m",
                    help="the sidecars' sensing interval (the seed's default: 1m)")
    ap.add_argument("--max-copy-delay", type=float, default=1.0,
                    help="seconds a file's copy may be late")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the data, configs and logs under this directory")
    args = ap.parse_args(argv)
    results = []
    for n in (int(x) for x in args.mirrors.split(",")):
        opts = Options(mirrors=n, seconds=args.seconds, rate=args.rate,
                       replicas=args.replicas, interval=args.interval,
                       max_copy_delay=args.max_copy_delay, seed=args.seed)
        keep = None if args.keep is None else args.keep / f"n{n}"
        with scratch_dir(keep, prefix="lakefs-many-mirrors-") as root:
            result = run(opts, root, out=lambda text: print(text, flush=True))
        print(report(result), flush=True)
        results.append(result)
    if len(results) > 1:
        print("summary: mirrors -> mirrors-table / source requests per commit, "
              "promotion after last copy p50/p99")
        for r in results:
            per = max(1, r.commits)
            print(f"  {r.options.mirrors:>5}: {r.table_total / per:6.1f} / "
                  f"{r.source_requests / per:5.1f}, "
                  f"{percentile(r.lag_from_copy, 50) if r.lag_from_copy else -1:.3f} / "
                  f"{percentile(r.lag_from_copy, 99) if r.lag_from_copy else -1:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
