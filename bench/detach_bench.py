"""Benchmark of failover: from the detach request to the first write the mirror accepts.

Run ``python -m bench.detach_bench [--runs 10]``.

Two regions of real processes on loopback (``e2e.cluster``: a server and a
replication service each, SQLite metadata and mirrors table, local storage, the
builtin copier by default), the sidecars acting as a replication user with the
broad documented policy (one user for every mirror of the run). Each run mirrors a
source repository of its own (one commit) into ``west`` and waits until the mirror
serves that commit; then, through ``west``'s endpoint as an operator would:

1. ``POST /service/replication/v1/repositories/{repo}/mirrors/{id}/detach``;
2. uploads an object to the detached repository's ``main`` again and again (every
   few milliseconds) until one is accepted (201).

It prints, per run and as p50 and max over the runs: the detach request's own
latency, and the time from sending it to the first accepted write (what a failover
waits for before the destination takes writes).
"""

from __future__ import annotations

import argparse
import math
import random
import time
from dataclasses import dataclass

from e2e.api import ApiError, RegionClient
from e2e.cluster import Cluster, ClusterSpec, scratch_dir, start_cluster
from e2e.workload import SourceDriver
from lakefs_testing.waiting import wait_for


@dataclass
class Sample:
    repository: str
    #: seconds the detach request took
    detach: float
    #: seconds from sending the detach request to the first accepted write
    first_write: float
    #: writes refused before the first accepted one
    refused: int


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def mirrored(cluster: Cluster, east: RegionClient, west: RegionClient, repo: str,
             seed: int) -> str:
    """A source repository with one commit, its mirror in west serving it; the mirror id."""
    src = SourceDriver(east, repo, None, random.Random(seed))
    src.create_repository(cluster.east.namespace(repo))
    head = src.write_commit("main", files=3)
    mirror = f"{repo}-mirror"
    mirror_id = str(east.create_mirror(repo, mirror, "west",
                                       cluster.west.namespace(mirror))["id"])

    def promoted() -> bool:
        try:
            return west.branches(mirror).get("main") == head
        except ApiError:
            return False

    wait_for(promoted, 120, 0.02, what=f"{mirror} serving {head[:12]}")
    return mirror_id


def sample(west: RegionClient, repo: str, mirror_id: str, timeout: float) -> Sample:
    mirror = f"{repo}-mirror"
    started = time.monotonic()
    west.detach_mirror(repo, mirror_id)
    detached = time.monotonic()
    refused = 0
    while True:
        try:
            west.upload(mirror, "main", "after-failover.txt", b"written after the detach")
            break
        except ApiError as e:
            if e.status != 403:
                raise
            refused += 1
            if time.monotonic() - started > timeout:
                raise SystemExit(f"{mirror}: no write accepted within {timeout}s") from e
            time.sleep(0.002)
    return Sample(repo, detached - started, time.monotonic() - started, refused)


def run(args: argparse.Namespace) -> None:
    spec = ClusterSpec(mirrors_db=args.mirrors_db, storage=args.storage,
                       replication=args.replication, policy=args.policy, log_level="WARN")
    print(f"cluster: {spec.describe()}", flush=True)
    with scratch_dir(None, "detach-bench-") as root, start_cluster(root, spec) as cluster, \
            cluster.east.client() as east, cluster.west.client() as west:
        samples = []
        for i in range(args.runs):
            repo = f"detach{i:02d}"
            mirror_id = mirrored(cluster, east, west, repo, seed=i)
            s = sample(west, repo, mirror_id, args.timeout)
            samples.append(s)
            print(f"  {repo}: detach request {s.detach * 1000:7.1f} ms, first accepted "
                  f"write after {s.first_write * 1000:7.1f} ms ({s.refused} refused before)",
                  flush=True)
    for label, values in (("detach request", [s.detach for s in samples]),
                          ("detach -> first accepted write", [s.first_write for s in samples])):
        print(f"{label:<31} n={len(values)} p50={percentile(values, 50) * 1000:7.1f} ms "
              f"max={max(values) * 1000:7.1f} ms", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="detached mirrors (default: "
                                                             "%(default)s)")
    parser.add_argument("--mirrors-db", choices=("sqlite", "postgres", "dynamodb"),
                        default="sqlite")
    parser.add_argument("--storage", choices=("local", "s3"), default="local")
    parser.add_argument("--replication", choices=("builtin", "builtin-direct"),
                        default="builtin", help="who copies objects (native would need a "
                                                "replicator beside the cluster)")
    parser.add_argument("--policy", choices=("broad", "admin"), default="broad",
                        help="the sidecars' user (the narrow policy names one mirror only)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a run may wait for an accepted write")
    args = parser.parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
