"""Benchmark of the graveler core: apply, diff and merge against repository size.

Run ``python -m bench.graveler_bench [--sizes 10000,100000,1000000] [--k 1000]``.
For each size N it builds a base metarange of N entries (with ``apply`` from the
empty metarange, in sorted batches) over a local blockstore in a temporary
directory, then times, each with a fresh ``RangeManager`` (cold caches):

* ``partition``: apply of k new entries under one new prefix in the middle of the
  keyspace (a new partition of a table);
* ``updates``: apply of k updates to random existing keys;
* diff of the base against each result, and a three-way merge of each result into
  a destination that changed one other key.

Each case runs ``--repeat`` times, every run elsewhere (the new partition at another
place in the keyspace, other random keys) because its cost is that of the ranges it
lands in, whose sizes vary. The files a run wrote are deleted before the next. The
median time is printed (wall clock, and the CPU time of the process, all threads:
on a shared machine the wall clock includes waiting for a core), with the ranges
written and reused, the entries in the written ranges ("rewritten") of the median
run by those counts, and the rows rewritten per second of the median time. The
process runs with the server's allocator settings (``bench._allocator``).

``--store s3`` runs the same against S3 (moto in server mode on loopback, in a child
process), where every range read and write is a request: there the diff's reads
ahead and the apply's overlap of reads and writes show.

It prints one line per case and the ratio of the partition apply time at the
largest size to that at the smallest: with content-defined ranges the cost
follows the change, not the repository, so that ratio stays small.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TypeVar

import bench._allocator  # noqa: F401 - first: the server's allocator settings
from lakefs_core.block.base import BlockStore
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler import Entry, EntryRecord, RangeManager
from lakefs_core.graveler.ranges import DEFAULT_RAGGEDNESS

ENTRIES_PER_PARTITION = 1_000
NAMESPACE = "local://bench-repo"
T = TypeVar("T")


def key(partition: int, n: int) -> str:
    return f"tables/events/part={partition:05d}/file-{n:07d}.parquet"


def entry(path: str, version: int = 0) -> Entry:
    """An entry like one the server writes: a unique data address and an MD5 etag."""
    digest = hashlib.md5(f"{version}:{path}".encode()).hexdigest()
    return Entry(address=f"data/gv{version}/{digest[:20]}", size=1_000 + len(path) + version,
                 etag=digest, mtime=1_700_000_000.0 + version)


def base_records(n: int) -> Iterator[EntryRecord]:
    for i in range(n):
        path = key(i // ENTRIES_PER_PARTITION, i)
        yield EntryRecord(path, entry(path))


def batched(items: Iterator[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class Case:
    n: int
    k: int
    kind: str
    seconds: float
    cpu: float
    written: int | None = None
    reused: int | None = None
    #: entries in the ranges written (what the operation had to read and rewrite)
    rewritten: int | None = None

    def line(self) -> str:
        counts = "" if self.written is None or self.rewritten is None else (
            f"{self.written:>8} {self.reused:>8} {self.rewritten:>10} "
            f"{self.rewritten / self.seconds:>11,.0f}")
        return (f"{self.n:>9} {self.k:>6} {self.kind:<18} {self.seconds:>9.3f} "
                f"{self.cpu:>7.3f} {counts}")


def run_size(n: int, k: int, raggedness: int, batch: int, store: BlockStore, namespace: str,
             rng: random.Random, repeat: int) -> list[Case]:
    def manager() -> RangeManager:
        return RangeManager(store, namespace, raggedness=raggedness)

    builder = manager()
    mr = builder.empty_metarange()
    build_start = time.perf_counter()
    for records in batched(base_records(n), batch):
        mr = builder.apply(mr, records).metarange_id
    build_seconds = time.perf_counter() - build_start
    del builder  # and its caches: the timed runs start from a small heap
    gc.collect()
    rm = manager()  # for bookkeeping outside the timings
    ranges = rm.get_metarange(mr).ranges
    sizes = [store.stat(rm.range_address(r.id)).size for r in ranges]
    print(f"# N={n}: built in {build_seconds:.1f}s, {len(ranges)} ranges, "
          f"{n / len(ranges):.0f} entries/range, "
          f"{sum(sizes) / len(sizes) / 1024:.0f} KiB/range file (mean), "
          f"{max(sizes) / 1024:.0f} KiB max", flush=True)

    # the merge destination changed one key that no timed change touches
    other = key(0, 0) + ".dest"
    dest = rm.apply(mr, [EntryRecord(other, entry(other, 2))]).metarange_id

    def forget(old_id: str, new_id: str) -> None:
        """Delete the files an operation wrote, so that the next run writes its own."""
        if new_id != old_id:
            for info in rm.new_ranges(old_id, new_id):
                store.delete(rm.range_address(info.id))
            store.delete(rm.range_address(new_id))

    # a first read and write outside the timings (lazy imports, codec setup)
    warm = manager().apply(mr, [EntryRecord(other + ".warm", entry(other, 3))]).metarange_id
    forget(mr, warm)

    def changes(kind: str, run: int) -> list[EntryRecord]:
        """Run ``run``'s change: each run lands somewhere else in the keyspace."""
        if kind == "partition":
            partitions = max(1, n // ENTRIES_PER_PARTITION)
            prefix = f"tables/events/part={partitions * (run + 1) // (repeat + 1):05d}-new/"
            return [EntryRecord(f"{prefix}file-{j:07d}.parquet", entry(f"{prefix}{j}", 1))
                    for j in range(k)]
        picked = sorted(rng.sample(range(n), min(k, n)))
        return [EntryRecord(key(i // ENTRIES_PER_PARTITION, i),
                            entry(key(i // ENTRIES_PER_PARTITION, i), 1)) for i in picked]

    cases = []
    for kind in ("partition", "updates"):
        seconds: dict[str, list[float]] = {"apply": [], "diff": [], "merge": []}
        cpu: dict[str, list[float]] = {"apply": [], "diff": [], "merge": []}
        counts: dict[str, list[tuple[int, int, int]]] = {"apply": [], "merge": []}
        for run in range(repeat):
            records = changes(kind, run)
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            result = manager().apply(mr, records)
            seconds["apply"].append(time.perf_counter() - start)
            cpu["apply"].append(time.process_time() - start_cpu)

            start, start_cpu = time.perf_counter(), time.process_time()
            diff = list(manager().diff(mr, result.metarange_id))
            seconds["diff"].append(time.perf_counter() - start)
            cpu["diff"].append(time.process_time() - start_cpu)
            assert len(diff) == len(records)

            start, start_cpu = time.perf_counter(), time.process_time()
            merged = manager().merge(mr, result.metarange_id, dest)
            seconds["merge"].append(time.perf_counter() - start)
            cpu["merge"].append(time.process_time() - start_cpu)
            assert merged.changes == len(records)

            for op, old, new in (("apply", mr, result.metarange_id),
                                 ("merge", dest, merged.metarange_id)):
                written = rm.new_ranges(old, new)
                total = len(rm.get_metarange(new).ranges)
                counts[op].append((len(written), total - len(written),
                                   sum(r.count for r in written)))
            forget(dest, merged.metarange_id)
            forget(mr, result.metarange_id)
        for op in ("apply", "diff", "merge"):
            median_counts = (statistics.median_low(counts[op]) if op in counts
                             else (None, None, None))
            cases.append(Case(n, k, f"{op}/{kind}", statistics.median(seconds[op]),
                              statistics.median(cpu[op]),
                              *median_counts))
    for case in cases:
        print(case.line(), flush=True)
    return cases


def s3_stores(stack: ExitStack) -> Callable[[int], tuple[BlockStore, str]]:
    """Stores on one moto server (a child process, stopped with ``stack``): a bucket
    per repository size."""
    import boto3
    from botocore.config import Config

    from bench.gateway_bench import _run_moto, child_process
    from lakefs_core.block.config import S3Config, S3Credentials
    from lakefs_core.block.s3 import S3BlockStore

    endpoint = stack.enter_context(child_process(_run_moto))
    keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}), **keys)
    store = S3BlockStore(S3Config(
        endpoint=endpoint, force_path_style=True, region="us-east-1",
        credentials=S3Credentials(access_key_id="testing", secret_access_key="testing")))

    def store_for(n: int) -> tuple[BlockStore, str]:
        client.create_bucket(Bucket=f"bench-{n}")
        return store, f"s3://bench-{n}/repo"
    return store_for


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="comma-separated repository sizes N (default: %(default)s)")
    parser.add_argument("--k", type=int, default=1_000,
                        help="changes per case (default: %(default)s)")
    parser.add_argument("--raggedness", type=int, default=DEFAULT_RAGGEDNESS,
                        help="mean entries per range (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=50_000,
                        help="entries per apply while building the base (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs per case; the median is printed (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--store", choices=("local", "s3"), default="local",
                        help="where the ranges are: files, or S3 on moto (default: %(default)s)")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="graveler-bench-")
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        store_for = (s3_stores(stack) if args.store == "s3"
                     else lambda n: (LocalBlockStore(os.path.join(workdir, f"n{n}")), NAMESPACE))
        print(f"store={args.store} raggedness={args.raggedness} k={args.k} "
              f"repeat={args.repeat} (median seconds, each run with cold caches)")
        print(f"{'N':>9} {'k':>6} {'kind':<18} {'seconds':>9} {'cpu':>7} {'written':>8} "
              f"{'reused':>8} {'rewritten':>10} {'rows/s':>11}")
        results = {n: run_size(n, args.k, args.raggedness, args.batch, *store_for(n), rng,
                               args.repeat) for n in sizes}
    if len(sizes) > 1:
        def partition_time(n: int) -> float:
            return next(c.seconds for c in results[n] if c.kind == "apply/partition")
        small, large = sizes[0], sizes[-1]
        print(f"ratio apply/partition time(N={large})/time(N={small}): "
              f"{partition_time(large) / partition_time(small):.2f}")


if __name__ == "__main__":
    main()
