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
their ids. Each stage's CPU time is the best of ``--repeat`` rounds, measured twice:
with every output kept (most of it lands in memory the process has not touched yet,
as in a commit, whose range cache keeps what it reads and writes) and with each
output dropped as soon as it is made (the next lands in memory just freed, which is
cheaper: no page faults). The sum over the stages is the CPU a commit that rewrites every row
pays at least, whatever it overlaps; divided by the cores the process can use, it
bounds the commit's wall time from below, and so the rows rewritten per second from
above. ``bench.commit_bench`` prints what a whole commit reaches.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

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


def _best(repeat: int, stage: Callable[[Any], object], inputs: Sequence[Any],
          keep: bool) -> float:
    """The least CPU seconds of ``repeat`` runs of ``stage`` over ``inputs``, holding
    every output until all runs are done (``keep``) or none (see the module docs)."""
    best = float("inf")
    kept: list[object] = []
    for _ in range(repeat):
        c0 = time.process_time()
        for item in inputs:
            out = stage(item)
            if keep:
                kept.append(out)
        out = None
        best = min(best, time.process_time() - c0)
    kept.clear()
    return best


def run(n: int, repeat: int, workdir: str) -> tuple[int, int, dict[str, tuple[float, float]]]:
    """Rows, ranges, and per stage the CPU seconds (outputs kept, outputs dropped)."""
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

    def range_id(enc: Any) -> str:
        return range_id_of_payload(payload_of(enc))

    # the stages are the product's own only if they give back its files and ids
    for info, stored, written, enc in zip(infos, data, files, encodings, strict=True):
        if written != stored or range_id(enc) != info.id:
            raise RuntimeError(f"range {info.id}: the stages do not give back its file and id")
    puts = itertools.count()

    def put(file: bytes) -> None:
        out.put(f"local://out/{next(puts)}", file)

    stages: dict[str, tuple[Callable[[Any], object], Sequence[Any]]] = {
        "read": (store.get, addresses),
        "decode": (decode_range_table, data),
        "encodings": (table_record_encodings, tables),
        "hash": (range_id, encodings),
        "write": (encode_range_table, tables),
        "put": (put, files),
    }
    figures = {name: (_best(repeat, stage, inputs, True), _best(repeat, stage, inputs, False))
               for name, (stage, inputs) in stages.items()}
    return sum(t.num_rows for t in tables), len(tables), figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="commit-floor-")
    try:
        rows, ranges, figures = run(args.n, args.repeat, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cores = len(os.sched_getaffinity(0))
    print(f"{rows:,} rows in {ranges} ranges; CPU seconds per stage on one thread, best of "
          f"{args.repeat}, with outputs kept (fresh memory) / dropped (reused memory):")
    for name, (kept, dropped) in figures.items():
        print(f"  {name:<10} {kept:.3f}s / {dropped:.3f}s")
    for i, what in enumerate(("kept", "dropped")):
        total = sum(f[i] for f in figures.values())
        print(f"outputs {what}: {total:.3f}s = {rows / total:,.0f} rows/s on one core; "
              f"on {cores} cores a commit >= {total / cores:.3f}s, "
              f"<= {rows * cores / total:,.0f} rows rewritten/s")


if __name__ == "__main__":
    main()
