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
  rows rewritten (reported with rows rewritten per second).

Each commit is timed by the wall clock and by the CPU time of the process (all
threads): on a shared machine the wall clock includes waiting for a core. The process
runs with the server's allocator settings (``bench._allocator``).

It prints one line per size and case and the ratio commit(N max) / commit(N min)
of the partition case.
"""

from __future__ import annotations

import argparse
import random
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
    #: the updates case: commit seconds (wall, CPU), ranges written, entries in them
    updates_commit: float
    updates_cpu: float
    updates_written: int
    updates_rewritten: int


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

    for i in sorted(random.Random(seed).sample(range(n), min(k, n))):
        path = key(i // ENTRIES_PER_PARTITION, i)
        g.set_entry("bench", "updates", path, entry(path, 2))
    g3 = Graveler(refstore, lambda _sid: store)  # cold range caches
    t0, c0 = time.perf_counter(), time.process_time()
    upd = g3.commit("bench", "updates", f"{k} random updates", "bench")
    t_updates, c_updates = time.perf_counter() - t0, time.process_time() - c0
    new = rm.new_ranges(mr, upd.commit.metarange_id)
    refstore.close()
    return Result(t_commit, t_diff, t_merge, written, total - written,
                  t_updates, c_updates, len(new), sum(r.count for r in new))


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
        print(f"N={n:>9,} k={args.k} updates:   commit {r.updates_commit:.3f}s "
              f"(CPU {r.updates_cpu:.3f}s)  "
              f"ranges written {r.updates_written}, rows rewritten {r.updates_rewritten:,} "
              f"({r.updates_rewritten / r.updates_commit:,.0f} rows/s)", flush=True)
    lo, hi = min(sizes), max(sizes)
    for what in ("commit", "diff", "merge"):
        ratio = getattr(results[hi], what) / getattr(results[lo], what)
        print(f"{what}(N={hi:,}) / {what}(N={lo:,}) = {ratio:.2f}")


if __name__ == "__main__":
    main()
