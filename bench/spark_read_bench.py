"""Benchmark: a full read of >= 1 GiB of Parquet, format("lakefs") vs spark.read.parquet.

Run ``python -m bench.spark_read_bench [--files 16] [--rows-per-file 1200000] [--runs 3]``.

It starts a server (SQLite, local blockstore) in a temporary directory, writes
``--files`` Parquet files (snappy, random values: about 64+ MiB each) straight into
a repository's storage namespace, stages them through the API's link endpoint and
commits. Then it times, on a local SparkSession (``--master``, default ``local[2]``),
the same aggregation forcing every column (sums of the numbers, of string
lengths, and a row count):

* ``lakefs``: ``spark.read.format("lakefs")`` at the commit id (ranges read from the
  store, files read by physical address in Python workers, Arrow batches to the JVM);
* ``parquet``: ``spark.read.parquet`` on the very same physical files (Spark's own
  vectorized reader).

One warm-up run each, then ``--runs`` alternating runs; it prints every time, the
medians and their ratio (lakefs / parquet; the target is <= 1.2), and checks that
both reads agree. The data directory is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakefs_testing.live_server import live_server

REPO = "bench-spark"
PATH = "events"


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(seed * rows, (seed + 1) * rows, dtype=np.int64)
    cols: dict[str, Any] = {"id": ids}
    for i in range(6):
        cols[f"m{i}"] = rng.random(rows)
    cols["count"] = rng.integers(0, 1_000_000, rows, dtype=np.int32)
    cols["code"] = pa.array(np.char.add("c", rng.integers(0, 10**8, rows).astype(str)))
    return pa.table(cols)


def _write_dataset(client: httpx.Client, root: str, files: int, rows: int
                   ) -> list[tuple[str, str, int]]:
    """Write the files into the namespace, each at an address the server hands out;
    returns (path, physical address, size) each."""
    out = []
    for i in range(files):
        path = f"{PATH}/part-{i:05d}.parquet"
        r = client.get(f"/repositories/{REPO}/branches/main/staging/backing",
                       params={"path": path})
        r.raise_for_status()
        address = r.json()["physical_address"]
        local = os.path.join(root, REPO, address.removeprefix(f"local://{REPO}/"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        pq.write_table(_table(rows, i), local, compression="snappy", row_group_size=128 * 1024)
        out.append((path, address, os.path.getsize(local)))
    return out


def _aggregate(df: Any) -> tuple[Any, ...]:
    from pyspark.sql import functions as F

    numeric = [c for c in df.columns if c != "code"]
    row = df.agg(F.count(F.lit(1)), *[F.sum(c) for c in numeric],
                 F.sum(F.length("code"))).collect()[0]
    return tuple(round(v, 3) if isinstance(v, float) else v for v in row)


def _time(fn: Callable[[], tuple[Any, ...]]) -> tuple[float, tuple[Any, ...]]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--rows-per-file", type=int, default=1_200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = tempfile.mkdtemp(prefix="spark-read-bench-")
    try:
        with live_server(os.path.join(tmp, "server")) as server:
            blockstore = server.services.config.blockstore
            assert blockstore is not None and blockstore.local is not None
            root = blockstore.local.path
            with server.client() as c:
                r = c.post("/repositories", json={"name": REPO,
                                                   "storage_namespace": f"local://{REPO}"})
                r.raise_for_status()
                started = time.perf_counter()
                files = _write_dataset(c, root, args.files, args.rows_per_file)
                total = sum(size for _, _, size in files)
                print(f"wrote {len(files)} files, {total / 2**30:.2f} GiB "
                      f"({args.rows_per_file} rows each) in {time.perf_counter() - started:.1f}s")
                for path, address, size in files:
                    r = c.put(f"/repositories/{REPO}/branches/main/staging/backing",
                              params={"path": path},
                              json={"staging": {"physical_address": address},
                                    "checksum": "", "size_bytes": size})
                    r.raise_for_status()
                r = c.post(f"/repositories/{REPO}/branches/main/commits",
                           json={"message": "benchmark dataset"})
                r.raise_for_status()
                commit_id = r.json()["id"]
            _run(server, root, commit_id, files, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _run(server: Any, root: str, commit_id: str, files: list[tuple[str, str, int]],
         args: argparse.Namespace) -> None:
    from pyspark.sql import SparkSession

    from lakefs_core.spark import register

    spark = (SparkSession.builder.master(args.master).appName("spark-read-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", args.driver_memory)
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    options = {"endpoint": server.endpoint, "access_key_id": server.access_key_id,
               "secret_access_key": server.secret_access_key, "repository": REPO,
               "ref": commit_id, "blockstore_root": root}
    local_paths = [os.path.join(root, address.removeprefix("local://"))
                   for _, address, _ in files]

    def via_lakefs() -> tuple[Any, ...]:
        return _aggregate(spark.read.format("lakefs").options(**options).load(PATH))

    def via_parquet() -> tuple[Any, ...]:
        return _aggregate(spark.read.parquet(*local_paths))

    try:
        times: dict[str, list[float]] = {"lakefs": [], "parquet": []}
        results = {}
        for name, fn in (("lakefs", via_lakefs), ("parquet", via_parquet)):
            seconds, results[name] = _time(fn)
            print(f"warm-up {name:8s} {seconds:7.2f}s")
        if results["lakefs"] != results["parquet"]:
            raise SystemExit(f"reads disagree: {results}")
        for run in range(args.runs):
            for name, fn in (("lakefs", via_lakefs), ("parquet", via_parquet)):
                seconds, result = _time(fn)
                if result != results[name]:
                    raise SystemExit(f"{name} read changed: {result} != {results[name]}")
                times[name].append(seconds)
                print(f"run {run + 1}   {name:8s} {seconds:7.2f}s")
        lakefs, parquet = (statistics.median(times[n]) for n in ("lakefs", "parquet"))
        gib = sum(size for _, _, size in files) / 2**30
        print(f"median lakefs  {lakefs:7.2f}s ({gib / lakefs:.2f} GiB/s)")
        print(f"median parquet {parquet:7.2f}s ({gib / parquet:.2f} GiB/s)")
        print(f"ratio lakefs/parquet {lakefs / parquet:.2f} (target <= 1.2)")
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
