"""Benchmark of a whole commit through the engine (SQLite refstore, local storage).

Run ``python -m bench.commit_bench [--sizes 10000,100000,1000000] [--k 1000]``.
For each size N it builds a branch whose head commit holds N objects (the base
metarange is written with the range manager, in sorted batches, and committed as
one commit), then stages k new objects under one new prefix (a new partition) with
``Graveler.set_entry`` and times ``Graveler.commit``: reading the staged rows from
SQLite, applying them onto the parent metarange, writing the new ranges, the commit
record and the branch compare-and-swap. It also times a diff and a merge of that
change. It prints one line per size and the ratio commit(N max) / commit(N min).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import replace

from bench.graveler_bench import base_records, batched, entry
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler.encoding import commit_id
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import Commit
from lakefs_core.refstore.sql import SQLRefStore


def run(n: int, k: int, workdir: str) -> tuple[float, float, float, int, int]:
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
    refstore.close()
    return t_commit, t_diff, t_merge, written, total - written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--k", type=int, default=1000)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    for n in sizes:
        workdir = tempfile.mkdtemp(prefix="commit-bench-")
        try:
            results[n] = run(n, args.k, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        c, d, m, w, r = results[n]
        print(f"N={n:>9,} k={args.k}: commit {c:.3f}s  diff {d:.3f}s  merge {m:.3f}s  "
              f"ranges written {w}, reused {r}", flush=True)
    lo, hi = min(sizes), max(sizes)
    for i, what in enumerate(("commit", "diff", "merge")):
        print(f"{what}(N={hi:,}) / {what}(N={lo:,}) = {results[hi][i] / results[lo][i]:.2f}")


if __name__ == "__main__":
    main()
