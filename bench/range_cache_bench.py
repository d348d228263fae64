"""What the parsed ranges a range cache keeps really hold, against what it counts.

Run ``python -m bench.range_cache_bench [--ranges 64] [--entries 1000]``.

Writes ``--ranges`` range files of ``--entries`` entries each (paths, data addresses and
MD5 etags like the server's), then, with a cache that bounds nothing, reads them as the
server and the validators do, in three states: the Arrow table only (a validation's
path lookups), with record encodings (a commit rewriting the range), with records (a
listing, a diff). For each it prints what the cache counts (its ``weight``) and what the
process really holds for them: Python objects (``tracemalloc``), Arrow buffers (Arrow's
pool), resident memory (RSS), each the growth over the empty cache; and the factor
real / counted.

Then the steady state the bound is for: in one child process per bound (``--bounds``, MB),
every range is read again and again (records and encodings) through a cache with that
bound, so ranges are evicted and read back; it prints each process's resident memory at
the end, and the RSS each counted MB costs (the slope between the smallest and each
larger bound).

The processes run with the server's allocator settings (``lakefs_core.memory``).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench._allocator  # noqa: F401 - first: the server's allocator settings
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler import Entry, EntryRecord, RangeManager
from lakefs_core.graveler.ranges import RangeCache
from lakefs_core.memory import release_free_memory

NAMESPACE = "local://bench"
#: a bound that bounds nothing here
UNBOUNDED = 1 << 34


def record(i: int) -> EntryRecord:
    path = f"tables/events/part={i // 5000:05d}/file-{i:07d}.parquet"
    digest = hashlib.md5(path.encode()).hexdigest()
    return EntryRecord(path, Entry(address=f"data/gv0/{digest[:20]}", size=1000 + i % 977,
                                   etag=digest, mtime=1_700_000_000.0 + i))


def write_ranges(root: Path, ranges: int, entries: int) -> list[str]:
    """Write the ranges once (their ids are in ``root/ids.json``); their ids."""
    ids_file = root / "ids.json"
    if ids_file.exists():
        return list(json.loads(ids_file.read_text()))
    writer = RangeManager(LocalBlockStore(str(root)), NAMESPACE, raggedness=entries,
                          max_range_entries=entries)
    mr = writer.apply(writer.empty_metarange(),
                      [record(i) for i in range(ranges * entries)]).metarange_id
    ids = [r.id for r in writer.get_metarange(mr).ranges]
    ids_file.write_text(json.dumps(ids))
    return ids


def rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


@dataclass
class Held:
    state: str
    counted: int
    python: int
    arrow: int
    rss: int

    def line(self) -> str:
        def mib(n: int) -> str:
            return f"{n / 2**20:8.1f}"

        counted = max(1, self.counted)
        return (f"{self.state:<18} {mib(self.counted)} {mib(self.python)} {mib(self.arrow)} "
                f"{mib(self.rss)} {(self.python + self.arrow) / counted:17.2f} "
                f"{self.rss / counted:11.2f}")


#: how each state reads a range
LOADS: dict[str, Callable[[RangeManager, str], object]] = {
    "table": lambda rm, rid: rm._range(rid),  # noqa: SLF001 - a lookup reads no encodings
    "table + encodings": lambda rm, rid: rm.read_range_table(rid)[1],
    "table + records": lambda rm, rid: rm.read_range(rid),
}


def held(state: str, root: Path, ids: list[str]) -> Held:
    import pyarrow as pa

    cache = RangeCache(max_ranges=1 << 20, max_bytes=UNBOUNDED)
    reader = RangeManager(LocalBlockStore(str(root)), NAMESPACE, cache=cache)
    load = LOADS[state]
    gc.collect()
    release_free_memory()
    rss0, arrow0 = rss(), pa.total_allocated_bytes()
    tracemalloc.start()
    for rid in ids:
        load(reader, rid)
    gc.collect()
    python, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    release_free_memory()
    out = Held(state, cache.weight, python, pa.total_allocated_bytes() - arrow0, rss() - rss0)
    cache.clear()
    return out


def churn(root: Path, bound: int, rounds: int = 3) -> dict[str, int]:
    """Every range read ``rounds`` times through a cache bounded at ``bound`` bytes."""
    ids = write_ranges(root, 0, 0)
    cache = RangeCache(max_bytes=bound)
    reader = RangeManager(LocalBlockStore(str(root)), NAMESPACE, cache=cache)
    for _ in range(rounds):
        for rid in ids:
            reader.read_range(rid)
            reader.read_range_table(rid)
    gc.collect()
    release_free_memory()
    return {"weight": cache.weight, "rss": rss()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.range_cache_bench",
                                 description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--ranges", type=int, default=64)
    ap.add_argument("--entries", type=int, default=1000, help="entries per range")
    ap.add_argument("--bounds", default="1,16,64",
                    help="cache bounds (MB) of the steady-state runs, the smallest first")
    ap.add_argument("--churn", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bound", type=float, default=16.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.churn is not None:  # a child of the steady-state runs
        print(json.dumps(churn(args.churn, int(args.bound * 1e6))))
        return 0
    root = Path(tempfile.mkdtemp(prefix="range-cache-bench-"))
    try:
        ids = write_ranges(root, args.ranges, args.entries)
        print(f"{len(ids)} ranges of {args.entries} entries; MiB held over the empty cache")
        print(f"{'state':<18} {'counted':>8} {'python':>8} {'arrow':>8} {'rss':>8} "
              f"{'(py+arrow)/counted':>17} {'rss/counted':>11}")
        for state in LOADS:
            print(held(state, root, ids).line(), flush=True)
        runs = []
        for mb in (float(b) for b in args.bounds.split(",")):
            out = subprocess.run(
                [sys.executable, "-m", "bench.range_cache_bench", "--churn", str(root),
                 "--bound", str(mb)], check=True, capture_output=True, text=True).stdout
            runs.append((mb, json.loads(out.strip().splitlines()[-1])))
        print("steady state, ranges evicted and read back (records and encodings):")
        base_mb, base = runs[0]
        for mb, r in runs:
            slope = ("" if mb == base_mb else
                     f", RSS per counted MB over the {base_mb:g} MB bound: "
                     f"{(r['rss'] - base['rss']) / max(1, r['weight'] - base['weight']):.2f}")
            print(f"  bound {mb:g} MB: counted {r['weight'] / 1e6:.1f} MB, "
                  f"RSS {r['rss'] / 1e6:.1f} MB{slope}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
