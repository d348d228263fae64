"""The least CPU a rewrite of whole ranges can take on this machine, stage by stage.

Run ``python -m bench.commit_floor_bench [--n 1000000] [--repeat 3]``.
It writes a metarange of N entries (as ``bench.commit_bench`` does), then times,
on one thread and each on its own, every stage that rewriting all of its ranges
must go through, over all of them:

* ``read``: the range files' bytes from the store;
* ``decode``: Parquet to Arrow tables (``decode_range_table``);
* ``encodings``: the record encodings of every row (``table_record_encodings``),
  what a range id hashes;
* ``hash``: SHA-256 of those encodings (``range_id_of_payload``);
* ``write``: Arrow tables to Parquet bytes (``encode_range_table``), the file format
  range ids and files are fixed to;
* ``put``: the files into a fresh directory of a local store.

The bench checks first that the stages give back the stored files byte for byte and
their ids. Each stage's CPU time is the best of ``--repeat`` rounds. Their sum is what a commit
that rewrites every row pays at least, whatever it overlaps; divided by the cores
the process can use it bounds the commit's wall time from below, and so the rows
rewritten per second from above (printed as ``ceiling``). ``bench.commit_bench``
prints what a whole commit reaches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import bench._allocator  # noqa: F401 - first: the server's allocator settings
from bench.graveler_bench import base_records, batched
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler.encoding import (
    payload_of,
    range_id_of_payload,
    table_record_encodings,
)
from lakefs_core.graveler.rangefile import decode_range_table, encode_range_table
from lakefs_core.graveler.ranges import RangeManager


def _best(repeat: int, stage: Callable[[], object]) -> float:
    """The least CPU seconds of ``repeat`` runs of ``stage``."""
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        stage()
        best = min(best, time.process_time() - c0)
    return best


def run(n: int, repeat: int, workdir: str) -> dict[str, float]:
    store = LocalBlockStore(f"{workdir}/blockstore")
    rm = RangeManager(store, "local://floor")
    mr = rm.empty_metarange()
    for batch in batched(base_records(n), 50_000):
        mr = rm.apply(mr, batch).metarange_id
    infos = rm.get_metarange(mr).ranges
    addresses = [rm.range_address(info.id) for info in infos]
    data = [store.get(a) for a in addresses]
    tables = [decode_range_table(d) for d in data]
    encodings = [table_record_encodings(t) for t in tables]
    out = LocalBlockStore(f"{workdir}/out")
    files = [encode_range_table(t) for t in tables]
    # the stages are the product's own only if they give back its files and ids
    for info, stored, written, enc in zip(infos, data, files, encodings, strict=True):
        if written != stored or range_id_of_payload(payload_of(enc)) != info.id:
            raise RuntimeError(f"range {info.id}: the stages do not give back its file and id")
    rounds = iter(range(repeat * 1000))

    def put() -> None:
        r = next(rounds)
        for i, f in enumerate(files):
            out.put(f"local://out/{r}/{i}", f)

    stages = {
        "read": lambda: [store.get(a) for a in addresses],
        "decode": lambda: [decode_range_table(d) for d in data],
        "encodings": lambda: [table_record_encodings(t) for t in tables],
        "hash": lambda: [range_id_of_payload(payload_of(e)) for e in encodings],
        "write": lambda: [encode_range_table(t) for t in tables],
        "put": put,
    }
    figures = {name: _best(repeat, stage) for name, stage in stages.items()}
    rows = sum(t.num_rows for t in tables)
    figures["rows"] = float(rows)
    figures["ranges"] = float(len(tables))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="commit-floor-")
    try:
        f = run(args.n, args.repeat, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows, ranges = int(f.pop("rows")), int(f.pop("ranges"))
    total = sum(f.values())
    cores = len(os.sched_getaffinity(0))
    print(f"{rows:,} rows in {ranges} ranges; CPU seconds per stage (one thread, best of "
          f"{args.repeat}):")
    for name, seconds in f.items():
        print(f"  {name:<10} {seconds:.3f}s  ({seconds / total:.0%})")
    print(f"  {'total':<10} {total:.3f}s  = {rows / total:,.0f} rows/s on one core")
    print(f"ceiling on {cores} cores: commit >= {total / cores:.3f}s, "
          f"<= {rows * cores / total:,.0f} rows rewritten/s")


if __name__ == "__main__":
    main()
