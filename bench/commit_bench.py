"""Benchmark of a whole commit through the engine (SQLite refstore, local storage).

Run ``python -m bench.commit_bench [--sizes 10000,100000,1000000] [--k 1000]``.
For each size N it builds a branch whose head commit holds N objects (the base
metarange is written with the range manager, in sorted batches, and committed as
one commit), then times two commits with ``Graveler.commit`` (reading the staged
rows from SQLite, applying them onto the parent metarange, writing the new ranges,
the commit record and the branch compare-and-swap), each with cold range caches:

* ``partition``: k new objects under one new prefix (a new partition), staged on
  ``main`` with ``Graveler.set_entry``; a diff and a merge of that change are
  timed too;
* ``updates``: k updates of random existing objects, staged on another branch:
  every range they land in is rewritten, so this commit's cost is that of the
  rows rewritten (reported with rows rewritten per second);
* ``updates (warm)``: k more random updates on that branch, committed by the same
  engine right after: the ranges it rewrites are mostly those the first one wrote,
  and the range cache holds as many of them as its bound allows
  (``DEFAULT_RANGE_CACHE_BYTES``).

Each commit is timed by the wall clock and by the CPU time of the process (all
threads): on a shared machine the wall clock includes waiting for a core. The minor
page faults it took are counted too: memory the process touches for the first time
(or again after the allocator gave it back) costs a fault per 4 KiB page, and a
commit that rewrites a million rows runs noticeably slower on fresh memory than on
memory it has just used. The process runs with the server's allocator settings
(``bench._allocator``).

It prints one line per size and case and the ratio commit(N max) / commit(N min)
of the partition case.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import tempfile
import time
from dataclasses import dataclass, replace

import bench._allocator  # noqa: F401 - first: the server's allocator settings
from bench.graveler_bench import ENTRIES_PER_PARTITION, base_records, batched, entry, key
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler.encoding import commit_id
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import Commit
from lakefs_core.refstore.sql import SQLRefStore


@dataclass
class Result:
    commit: float
    diff: float
    merge: float
    written: int
    reused: int
    #: the updates cases, cold and warm caches
    updates: Updates
    warm: Updates


@dataclass
class Updates:
    """One commit of random updates: seconds (wall, CPU), minor page faults, ranges
    written and the entries in them."""

    commit: float
    cpu: float
    faults: int
    written: int
    rewritten: int

    def line(self) -> str:
        return (f"commit {self.commit:.3f}s (CPU {self.cpu:.3f}s, {self.faults:,} page faults)  "
                f"ranges written {self.written}, rows rewritten {self.rewritten:,} "
                f"({self.rewritten / self.commit:,.0f} rows/s)")


def _timed_updates(g: Graveler, n: int, k: int, seed: int, version: int) -> Updates:
    """Stage k updates of random existing objects on ``updates`` and commit them."""
    for i in sorted(random.Random(seed).sample(range(n), min(k, n))):
        path = key(i // ENTRIES_PER_PARTITION, i)
        g.set_entry("bench", "updates", path, entry(path, version))
    parent = g.get_commit("bench", g.get_branch("bench", "updates").commit_id).commit.metarange_id
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0, c0 = time.perf_counter(), time.process_time()
    rec = g.commit("bench", "updates", f"{k} random updates", "bench")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    new = g.ranges_for(g.refstore.get_repository("bench")).new_ranges(
        parent, rec.commit.metarange_id)
    return Updates(wall, cpu, faults, len(new), sum(r.count for r in new))


def run(n: int, k: int, workdir: str, seed: int) -> Result:
    store = LocalBlockStore(f"{workdir}/blockstore")
    refstore = SQLRefStore(f"sqlite:///{workdir}/refs.db")
    g = Graveler(refstore, lambda _sid: store)
    repo = g.create_repository("bench", "local://bench")
    rm = g.ranges_for(repo)
    mr = rm.empty_metarange()
    for batch in batched(base_records(n), 50_000):
        mr = rm.apply(mr, batch).metarange_id
    main = refstore.get_branch("bench", "main")
    parent = g.get_commit("bench", main.commit_id).commit
    base = Commit(parents=(main.commit_id,), metarange_id=mr, message=f"{n} objects",
                  committer="bench", creation_date=1_700_000_000,
                  generation=parent.generation + 1)
    base_id = commit_id(base)
    refstore.put_commit("bench", base_id, base)
    refstore.update_branch("bench", main, replace(main, commit_id=base_id))
    g.create_branch("bench", "dest", "main")
    g.create_branch("bench", "updates", "main")
    g.set_entry("bench", "dest", "elsewhere/x", entry("elsewhere/x"))
    g.commit("bench", "dest", "other change", "bench")
    for i in range(k):
        path = f"tables/events/part=new-{n}/file-{i:07d}.parquet"
        g.set_entry("bench", "main", path, entry(path, 1))
    g2 = Graveler(refstore, lambda _sid: store)  # cold range caches
    t0 = time.perf_counter()
    rec = g2.commit("bench", "main", "new partition", "bench")
    t_commit = time.perf_counter() - t0
    t0 = time.perf_counter()
    diff, _ = g2.diff("bench", base_id, rec.id, amount=k + 10)
    t_diff = time.perf_counter() - t0
    assert len(diff) == k
    t0 = time.perf_counter()
    g2.merge("bench", "main", "dest", "bench")
    t_merge = time.perf_counter() - t0
    written = len(rm.new_ranges(mr, rec.commit.metarange_id))
    total = len(rm.get_metarange(rec.commit.metarange_id).ranges)

    g3 = Graveler(refstore, lambda _sid: store)  # cold range caches
    cold = _timed_updates(g3, n, k, seed, 2)
    warm = _timed_updates(g3, n, k, seed + 1, 3)  # the same engine: warm caches
    refstore.close()
    return Result(t_commit, t_diff, t_merge, written, total - written, cold, warm)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    for n in sizes:
        workdir = tempfile.mkdtemp(prefix="commit-bench-")
        try:
            results[n] = r = run(n, args.k, workdir, args.seed)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"N={n:>9,} k={args.k} partition: commit {r.commit:.3f}s  diff {r.diff:.3f}s  "
              f"merge {r.merge:.3f}s  ranges written {r.written}, reused {r.reused}", flush=True)
        print(f"N={n:>9,} k={args.k} updates:   {r.updates.line()}", flush=True)
        print(f"N={n:>9,} k={args.k} updates (warm): {r.warm.line()}", flush=True)
    lo, hi = min(sizes), max(sizes)
    for what in ("commit", "diff", "merge"):
        ratio = getattr(results[hi], what) / getattr(results[lo], what)
        print(f"{what}(N={hi:,}) / {what}(N={lo:,}) = {ratio:.2f}")


if __name__ == "__main__":
    main()
