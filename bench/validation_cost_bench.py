"""Benchmark of mirror validation cost: store requests to prove one commit present.

Run ``python -m bench.validation_cost_bench [--sizes 10000,1000000] [--ks 10,1000]``.

For each mirror size N it builds, over a local blockstore in a temporary directory,
a base metarange of N entries (``RangeManager.apply`` from the empty metarange, in
sorted batches). For each k it then makes two commits on top of the base and writes
the k new objects they reference:

* ``updates``: k existing paths, spread over the whole keyspace, get new objects;
* ``partition``: k new paths under one new prefix in the middle of the keyspace.

It counts the requests a :class:`~lakefs_core.graveler.presence.CommitValidator` over a
:class:`~lakefs_core.graveler.presence.CountingStore` makes to validate the new commit
given the base (a commit already proven present, as the mirror's current head is):

* ``cold``: a fresh validator, nothing cached (the worst case);
* ``warm``: the validator that proved the base by a full validation just before,
  as a sidecar that follows the mirror has (only where the base's objects exist).

The base's N data objects are written (tiny files) up to ``--full-max`` entries, so
that the base can be fully validated first; above that only the metadata files and
the k new objects exist, and the base counts as proven, which is what the mirror's
head is. The printed bound is ``k + 2 x (new ranges) + 2``; the counts do not depend
on N.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from bench.graveler_bench import ENTRIES_PER_PARTITION, batched, key
from lakefs_core.block.base import join_address
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler import Entry, EntryRecord, RangeManager
from lakefs_core.graveler.presence import CommitValidator, CountingStore

NAMESPACE = "local://bench-mirror"


def content(path: str, version: int) -> bytes:
    return f"{version}:{path}".encode()


def entry(path: str, version: int) -> Entry:
    """The entry of a tiny object whose bytes are :func:`content` (etag = MD5)."""
    data = content(path, version)
    digest = hashlib.md5(data).hexdigest()
    return Entry(address=f"data/gv{version}/{digest}", size=len(data), etag=digest,
                 mtime=1_700_000_000.0 + version)


def base_records(n: int) -> Iterator[EntryRecord]:
    for i in range(n):
        path = key(i // ENTRIES_PER_PARTITION, i)
        yield EntryRecord(path, entry(path, 0))


def write_object(store: LocalBlockStore, record: EntryRecord, version: int) -> None:
    assert record.entry is not None
    store.put(join_address(NAMESPACE, record.entry.address), content(record.path, version))


@dataclass
class Row:
    n: int
    k: int
    kind: str
    new_ranges: int
    cold: int
    warm: int | None

    @property
    def bound(self) -> int:
        return self.k + 2 * self.new_ranges + 2

    def line(self) -> str:
        warm = "-" if self.warm is None else str(self.warm)
        ok = "yes" if max(self.cold, self.warm or 0) <= self.bound else "NO"
        return (f"{self.n:>9} {self.k:>6} {self.kind:<10} {self.new_ranges:>6} "
                f"{self.cold:>6} {warm:>6} {self.bound:>6} {ok:>4}")


def count(validator: CommitValidator, store: CountingStore, target: str, base: str) -> int:
    before = store.requests
    result = validator.validate(target, base)
    if not result.complete:
        raise SystemExit(f"validation incomplete: {result.missing[:3]}")
    return store.requests - before


def run_size(n: int, ks: list[int], batch: int, full_max: int, workdir: str,
             rng: random.Random) -> list[Row]:
    raw = LocalBlockStore(os.path.join(workdir, f"n{n}"))
    rm = RangeManager(raw, NAMESPACE)
    mr = rm.empty_metarange()
    full = n <= full_max
    for records in batched(base_records(n), batch):
        mr = rm.apply(mr, records).metarange_id
        if full:
            for record in records:
                write_object(raw, record, 0)
    n_ranges = len(rm.get_metarange(mr).ranges)
    warm_validator: CommitValidator | None = None
    warm_store = CountingStore(raw)
    note = "base objects not written: the base counts as proven"
    if full:
        warm_validator = CommitValidator(warm_store, NAMESPACE)
        requests = count(warm_validator, warm_store, mr, rm.empty_metarange())
        note = f"full validation of the base: {requests} requests"
    print(f"# N={n}: {n_ranges} ranges; {note}", flush=True)

    rows = []
    partitions = max(1, n // ENTRIES_PER_PARTITION)
    for k in ks:
        prefix = f"tables/events/part={partitions // 2:05d}-new/"
        changes = {
            "updates": [EntryRecord(p, entry(p, k)) for p in sorted(
                key(i // ENTRIES_PER_PARTITION, i) for i in rng.sample(range(n), min(k, n)))],
            "partition": [EntryRecord(f"{prefix}file-{j:07d}.parquet",
                                      entry(f"{prefix}file-{j:07d}.parquet", k))
                          for j in range(k)],
        }
        for kind, records in changes.items():
            for record in records:
                write_object(raw, record, k)
            target = rm.apply(mr, records).metarange_id
            new_ranges = len(rm.new_ranges(mr, target))
            cold_store = CountingStore(raw)
            cold = count(CommitValidator(cold_store, NAMESPACE), cold_store, target, mr)
            warm = (count(warm_validator, warm_store, target, mr)
                    if warm_validator is not None else None)
            row = Row(n, len(records), kind, new_ranges, cold, warm)
            print(row.line(), flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,1000000",
                        help="comma-separated mirror sizes N (default: %(default)s)")
    parser.add_argument("--ks", default="10,1000",
                        help="comma-separated changed objects per commit (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=50_000,
                        help="entries per apply while building the base (default: %(default)s)")
    parser.add_argument("--full-max", type=int, default=100_000,
                        help="largest N whose base objects are written and fully validated "
                             "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    ks = sorted(int(s) for s in args.ks.split(",") if s.strip())
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="validation-bench-")
    rows: list[Row] = []
    try:
        print("store requests to validate a commit given a proven base "
              "(cold: fresh validator; warm: the one that proved the base)")
        print(f"{'N':>9} {'k':>6} {'kind':<10} {'new_rg':>6} {'cold':>6} {'warm':>6} "
              f"{'bound':>6} {'ok':>4}")
        for n in sizes:
            rows += run_size(n, ks, args.batch, args.full_max, workdir, rng)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    over = [r for r in rows if max(r.cold, r.warm or 0) > r.bound]
    print(f"within bound k + 2 x new ranges + 2: {len(rows) - len(over)}/{len(rows)}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
