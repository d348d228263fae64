"""Benchmark of mirror lag: from a commit's last object arriving to the mirror advancing.

Run ``python -m bench.mirror_lag_bench [--commits 20] [--polling-commits 20]``.

Two regions run in this process (``lakefs_testing.regions``: two servers, two
sidecars, a SQLite mirrors table), with ``object_replication.mode: native`` and the
sidecars on their **default** schedule (commit sensor every 1 minute, mirrors manager
every 20 seconds, missing pieces re-checked every 500 ms). Nothing copies objects
but this benchmark: like S3 replication, the harness's ``FaultyReplicator`` (here
without drops or duplicates) copies every new file of a commit (data objects,
ranges, metarange) to the mirror's namespace in random order with random delays,
and the benchmark notes when the last one lands. The lag of a commit is the time from
that moment to the mirror branch pointing at the commit (polled every few ms).

Each sample is one commit on its own repository (each with its own mirror), so
samples do not share a schedule:

* ``events``: the source server tells its sidecar of every branch move, which tells
  the destination's sidecar at once; commits one after another;
* ``polling``: the server's ref-event listener is removed, so only the commit sensor
  (every minute) finds new heads; commits start at random offsets within one sensor
  interval and run concurrently.

It prints p50/p99 of each mode (p99 of 20 samples is their maximum). Target: p50 at
most 2 s with events.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lakefs_core.ref_events import RefEventNotifier
from lakefs_testing.regions import Region, commit, create_mirror, create_source, two_regions, upload
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for

#: sections the harness fills in with short test intervals; without them the sidecar
#: runs on its defaults
SCHEDULE_SECTIONS = ("commit_sensor", "mirrors_manager", "validator")


@dataclass
class Sample:
    repository: str
    files: int
    #: seconds from the commit returning to the last file landing in the destination
    copy_seconds: float
    #: seconds from the last file landing to the mirror branch at the commit
    lag: float


def mirror_head(west: Region, repo: str) -> str | None:
    try:
        return west.graveler.get_branch(repo, "main").commit_id or None
    except Exception:  # noqa: BLE001 - the mirror repository is not there yet
        return None


class Bench:
    def __init__(self, east: Region, west: Region, *, seed: int, max_delay: float,
                 objects: int) -> None:
        self.east = east
        self.west = west
        self.rng = random.Random(seed)
        self.max_delay = max_delay
        self.objects = objects
        self._lock = threading.Lock()

    def replicate(self, repo: str) -> tuple[int, float]:
        """Copy the repository's new files to its mirror's namespace, every file once,
        in random order after random delays; returns (files, when the last landed)."""
        with self._lock:
            seed = self.rng.randrange(1 << 30)
        crr = FaultyReplicator(self.east.blockstore_root / repo,
                               self.west.blockstore_root / f"{repo}-mirror", seed=seed,
                               drop=0, duplicate=0, max_delay=self.max_delay)
        files = crr.run_once()  # its last step is the last file's copy
        return files, time.monotonic()

    def prepare(self, repo: str) -> None:
        """A source repository with one commit, mirrored and caught up."""
        create_source(self.east, repo)
        upload(self.east, repo, "main", "init.txt", b"init")
        head = commit(self.east, repo, "main", "init")
        self.replicate(repo)
        create_mirror(self.east, repo, f"{repo}-mirror", f"local://{repo}-mirror")
        wait_for(lambda: mirror_head(self.west, f"{repo}-mirror") == head, 120,
                 interval=0.05, what=f"{repo} mirrored")

    def sample(self, repo: str, n: int, timeout: float) -> Sample:
        """One commit of new objects, replicated late; its lag after the last file."""
        for i in range(self.objects):
            upload(self.east, repo, "main", f"batch-{n}/part-{i}.bin",
                   os.urandom(64 + 32 * i))
        head = commit(self.east, repo, "main", f"batch {n}")
        committed = time.monotonic()
        files, landed = self.replicate(repo)
        deadline = landed + timeout
        while mirror_head(self.west, f"{repo}-mirror") != head:
            if time.monotonic() > deadline:
                raise SystemExit(f"{repo}: mirror did not advance within {timeout}s")
            time.sleep(0.005)
        return Sample(repo, files, landed - committed, time.monotonic() - landed)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def report(mode: str, samples: list[Sample]) -> None:
    lags = [s.lag for s in samples]
    copies = [s.copy_seconds for s in samples]
    print(f"{mode:<8} n={len(lags):<3} p50={percentile(lags, 50):7.3f}s "
          f"p99={percentile(lags, 99):7.3f}s mean={statistics.fmean(lags):7.3f}s "
          f"min={min(lags):6.3f}s  (replication of a commit took "
          f"{statistics.median(copies):.2f}s median, "
          f"{statistics.median(s.files for s in samples):.0f} files)", flush=True)


def use_default_schedule(region: Region) -> None:
    config: dict[str, Any] = yaml.safe_load(region.config_path.read_text())
    for section in SCHEDULE_SECTIONS:
        config.pop(section, None)
    region.config_path.write_text(yaml.safe_dump(config))


def disable_ref_events(region: Region) -> None:
    listeners = region.graveler.ref_listeners
    listeners[:] = [f for f in listeners if not isinstance(f, RefEventNotifier)]


def run(args: argparse.Namespace, workdir: Path) -> None:
    mirrors_db = {"type": "sqlite", "sqlite": {"path": str(workdir / "mirrors.db")}}
    with two_regions(workdir, mirrors_db, mode="native", sidecars=False) as (east, west):
        for region in (east, west):
            use_default_schedule(region)
            region.start_sidecar()
        cfg = west.sidecars[0].sidecar.config
        sensor = cfg.commit_sensor.process_branches_duration.total_seconds()
        print(f"sidecar schedule: commit sensor {sensor:g}s, mirrors manager "
              f"{cfg.mirrors_manager.process_mirrors_interval_duration.total_seconds():g}s, "
              f"missing recheck {cfg.validator.missing_recheck_interval.total_seconds():g}s; "
              f"copies delayed up to {args.max_delay:g}s each", flush=True)
        bench = Bench(east, west, seed=args.seed, max_delay=args.max_delay,
                      objects=args.objects)
        repos = [f"repo{i:02d}" for i in range(max(args.commits, args.polling_commits))]
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(bench.prepare, repos))
        print(f"# {len(repos)} repositories mirrored in {time.monotonic() - start:.1f}s",
              flush=True)

        if args.commits:
            samples = [bench.sample(repo, 1, timeout=3 * sensor + 30)
                       for repo in repos[:args.commits]]
            report("events", samples)

        if args.polling_commits:
            disable_ref_events(east)
            offsets = {repo: bench.rng.random() * sensor
                       for repo in repos[:args.polling_commits]}

            def later(repo: str) -> Sample:
                time.sleep(offsets[repo])
                return bench.sample(repo, 2, timeout=3 * sensor + 30)

            print(f"# polling only: {len(offsets)} commits over the next {sensor:g}s",
                  flush=True)
            with ThreadPoolExecutor(max_workers=len(offsets)) as pool:
                report("polling", list(pool.map(later, offsets)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--commits", type=int, default=20,
                        help="samples with ref events (default: %(default)s)")
    parser.add_argument("--polling-commits", type=int, default=20,
                        help="samples with polling only; 0 skips them (default: %(default)s)")
    parser.add_argument("--objects", type=int, default=3,
                        help="new objects per commit (default: %(default)s)")
    parser.add_argument("--max-delay", type=float, default=0.2,
                        help="largest delay before each file copy, seconds "
                             "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mirror-lag-bench-") as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
