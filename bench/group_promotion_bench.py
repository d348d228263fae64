"""Benchmark of mirror group promotion: from the last piece of a cut landing to the
destination serving the cut, next to a lone mirror's promotion in the same run.

Run ``python -m bench.group_promotion_bench [--samples 20]``.

Two regions run in this process (``lakefs_testing.regions``: two servers, two sidecars,
a SQLite mirrors table), with ``object_replication.mode: native`` and the sidecars on
their **default** schedule (commit sensor every minute, missing pieces re-checked every
500 ms), the source server's ref events on. Nothing copies objects but the benchmark:
the harness's ``FaultyReplicator`` (without drops or duplicates) copies every new file
(data objects, ranges, metaranges) in random order with random delays, and the
benchmark notes when the last one lands.

Samples alternate, so both kinds share the machine's state:

* ``group``: a pipeline commits ``features`` then ``labels`` (two repositories whose
  mirrors form a group); the files of both commits are copied; the delay is from the
  last file landing to the destination serving both new heads;
* ``single``: one commit on a repository mirrored alone; the delay is from its last
  file landing to the mirror branch pointing at it.

It prints p50/p99 of each (p99 of 20 samples is their maximum) and the ratio of the
group's to the lone mirror's. Goal: the group's p50 and p99 at most 1.5 times the lone
mirror's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.mirror_lag_bench import Bench, mirror_head, percentile, use_default_schedule
from lakefs_testing.regions import commit, two_regions, upload
from lakefs_testing.waiting import wait_for

GROUPS = "/service/replication/v1/groups"
PIPELINE = ("features", "labels")
SINGLE = "single"


class GroupBench(Bench):
    """Samples of a group of two mirrors and of a lone mirror, in one pair of regions."""

    def group(self, repos: tuple[str, ...]) -> None:
        """Group the (prepared) mirrors of ``repos``; wait until the group serves a cut."""
        with self.east.client() as c:
            mirrors = c.get("/service/replication/v1/mirrors", params={"amount": 1000})
            ids = {m["source_repository"]: m["id"] for m in mirrors.json()["results"]}
            r = c.post(GROUPS, json={"name": "pipeline", "region": "west", "members": [
                {"mirror_id": ids[repo]} for repo in repos]})
            assert r.status_code == 201, r.text
            group_id = r.json()["id"]

        def served() -> bool:
            with self.west.client() as c:
                return c.get(f"{GROUPS}/{group_id}/status").json()["current"]

        wait_for(served, 120, interval=0.1, what="the group serves a cut")

    def _commit(self, repo: str, n: int) -> str:
        for i in range(self.objects):
            upload(self.east, repo, "main", f"batch-{n}/part-{i}.bin", os.urandom(64 + 32 * i))
        return commit(self.east, repo, "main", f"batch {n}")

    def _wait(self, heads: dict[str, str], landed: float, timeout: float) -> float:
        deadline = landed + timeout
        while any(mirror_head(self.west, f"{repo}-mirror") != head
                  for repo, head in heads.items()):
            if time.monotonic() > deadline:
                raise SystemExit(f"{sorted(heads)}: not promoted within {timeout}s")
            time.sleep(0.005)
        return time.monotonic() - landed

    def sample_of(self, repos: tuple[str, ...], n: int, timeout: float) -> float:
        """Commit to each of ``repos`` in order, copy their files; the delay from the last
        file landing to every mirror serving its new head."""
        heads = {repo: self._commit(repo, n) for repo in repos}
        landed = 0.0
        for repo in repos:
            _, landed = self.replicate(repo)
        return self._wait(heads, landed, timeout)


def report(kind: str, delays: list[float]) -> None:
    print(f"{kind:<7} n={len(delays):<3} p50={percentile(delays, 50):7.3f}s "
          f"p99={percentile(delays, 99):7.3f}s mean={statistics.fmean(delays):7.3f}s "
          f"min={min(delays):6.3f}s", flush=True)


def run(args: argparse.Namespace, workdir: Path) -> None:
    mirrors_db = {"type": "sqlite", "sqlite": {"path": str(workdir / "mirrors.db")}}
    with two_regions(workdir, mirrors_db, mode="native", sidecars=False) as (east, west):
        for region in (east, west):
            use_default_schedule(region)
            region.start_sidecar()
        cfg = west.sidecars[0].sidecar.config
        sensor = cfg.commit_sensor.process_branches_duration.total_seconds()
        print(f"sidecar schedule: commit sensor {sensor:g}s, missing recheck "
              f"{cfg.validator.missing_recheck_interval.total_seconds():g}s; copies "
              f"delayed up to {args.max_delay:g}s each; {args.objects} objects a commit",
              flush=True)
        bench = GroupBench(east, west, seed=args.seed, max_delay=args.max_delay,
                           objects=args.objects)
        for repo in (*PIPELINE, SINGLE):
            bench.prepare(repo)
        bench.group(PIPELINE)
        timeout = 3 * sensor + 30
        delays: dict[str, list[float]] = {"group": [], "single": []}
        for n in range(1, args.samples + 1):
            delays["group"].append(bench.sample_of(PIPELINE, n, timeout))
            delays["single"].append(bench.sample_of((SINGLE,), n, timeout))
        report("group", delays["group"])
        report("single", delays["single"])
        for q in (50, 99):
            single = percentile(delays["single"], q)
            ratio = percentile(delays["group"], q) / single if single else float("inf")
            print(f"p{q} group/single = {ratio:.2f}x (goal: at most 1.5x)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=20,
                        help="samples of each kind (default: %(default)s)")
    parser.add_argument("--objects", type=int, default=3,
                        help="new objects per commit (default: %(default)s)")
    parser.add_argument("--max-delay", type=float, default=0.2,
                        help="largest delay before each file copy, seconds "
                             "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="group-promotion-bench-") as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
