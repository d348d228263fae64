"""Benchmark of a zero-copy import against listing the same prefix with the store alone.

Run ``python -m bench.import_bench [--objects 100000] [--storage s3,local]``.

For each storage it fills a prefix with N small objects (S3: a bucket on moto in
server mode; local: files in a directory the server may import from), then

- lists the prefix with the store's client alone (S3: boto3 ``list_objects_v2``,
  paginated, 1000 keys a page; local: the local blockstore's listing, which reads each
  file once for its MD5 ETag, on a twin directory so that both start cold; ``os.walk``
  plus ``os.stat`` is printed too);
- imports it into a branch of a live server through the REST API (``importStart``,
  then ``importStatus`` polled every 50 ms until it completed): the listing, the
  range files, one commit.

It prints objects per second of each and their ratio. The import lists through the
same store client, so the ratio is what building the ranges and the commit cost on
top of the listing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from lakefs_core.block.local import LocalBlockStore
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV, moto

POLL = 0.05


def _import(srv: LiveServer, repo: str, namespace: str, source: str) -> tuple[float, int]:
    """Seconds of one import of ``source`` into a new repository, and objects imported."""
    with srv.client() as c:
        r = c.post("/repositories", json={"name": repo, "storage_namespace": namespace})
        assert r.status_code == 201, r.text
        url = f"/repositories/{repo}/branches/main/import"
        t0 = time.perf_counter()
        r = c.post(url, json={"paths": [{"type": "common_prefix", "path": source,
                                         "destination": "imported/"}],
                              "commit": {"message": "bench import"}})
        assert r.status_code == 202, r.text
        import_id = r.json()["id"]
        while True:
            status = c.get(url, params={"id": import_id}).json()
            if status.get("completed") or status.get("error"):
                break
            time.sleep(POLL)
        seconds = time.perf_counter() - t0
    if status.get("error"):
        raise RuntimeError(f"import failed: {status['error']}")
    return seconds, int(status["ingested_objects"])


def _report(storage: str, n: int, list_s: float, import_s: float) -> None:
    print(f"{storage:5}  {n:>7} objects  list {list_s:7.2f} s ({n / list_s:9.0f} obj/s)  "
          f"import {import_s:7.2f} s ({n / import_s:8.0f} obj/s)  "
          f"import/list time {import_s / list_s:5.2f}x", flush=True)


@contextlib.contextmanager
def _s3_env(endpoint: str) -> Iterator[dict[str, str]]:
    saved = {k: os.environ.get(k) for k in MOTO_ENV}
    os.environ.update(MOTO_ENV)
    try:
        yield {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": endpoint,
               "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
               "LAKEFS_BLOCKSTORE_S3_REGION": MOTO_ENV["AWS_DEFAULT_REGION"],
               "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": MOTO_ENV["AWS_ACCESS_KEY_ID"],
               "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY":
                   MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _fill_moto(s3: Any, bucket: str, keys: list[str]) -> str:
    """Put tiny objects at ``keys``: straight into the in-process moto backend when it
    is reachable (setup only: what is timed goes through HTTP), else by PutObject."""
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key in keys:
            backend.put_object(bucket, key, b"{}")
        return "moto backend"
    except (ImportError, KeyError, AttributeError, TypeError):
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b"{}"), keys))
        return "PutObject"


def bench_s3(n: int, workdir: Path) -> None:
    with moto() as server, _s3_env(server.endpoint) as env:
        s3 = boto3.client("s3", endpoint_url=server.endpoint,
                          config=Config(max_pool_connections=32))
        s3.create_bucket(Bucket="landing")
        t0 = time.perf_counter()
        keys = [f"events/day={i % 30:02}/part-{i:07}.json" for i in range(n)]
        how = _fill_moto(s3, "landing", keys)
        print(f"s3     filled {n} objects in {time.perf_counter() - t0:.1f} s ({how})",
              flush=True)
        t0 = time.perf_counter()
        listed = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="landing",
                                                                  Prefix="events/"):
            listed += len(page.get("Contents", []))
        list_s = time.perf_counter() - t0
        assert listed == n, listed
        s3.create_bucket(Bucket="lake")
        with live_server(str(workdir / "s3-server"), env) as srv:
            import_s, imported = _import(srv, "bench", "s3://lake/bench",
                                         "s3://landing/events/")
        assert imported == n, imported
        _report("s3", n, list_s, import_s)


def _fill_dir(landing: Path, n: int) -> None:
    for i in range(n):
        d = landing / f"day={i % 30:02}"
        if i < 30:
            d.mkdir(parents=True)
        (d / f"part-{i:07}.json").write_bytes(b"{}")


def bench_local(n: int, workdir: Path) -> None:
    landing, twin = workdir / "landing", workdir / "twin"
    t0 = time.perf_counter()
    _fill_dir(landing, n)
    _fill_dir(twin, n)  # the same files, listed cold by the store (it caches ETags)
    print(f"local  filled 2 x {n} files in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    listed = 0
    for dirpath, _dirs, files in os.walk(landing):
        for name in files:
            os.stat(os.path.join(dirpath, name))
            listed += 1
    walk_s = time.perf_counter() - t0
    assert listed == n, listed
    store = LocalBlockStore(str(workdir / "block"), allowed_external_prefixes=[str(twin)])
    t0 = time.perf_counter()
    listed = sum(1 for _ in store.list(f"local://{twin}/"))
    list_s = time.perf_counter() - t0
    assert listed == n, listed
    env = {"LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED": "true",
           "LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": json.dumps([str(landing)])}
    with live_server(str(workdir / "local-server"), env) as srv:
        import_s, imported = _import(srv, "bench", "local://bench", f"local://{landing}/")
    assert imported == n, imported
    print(f"local  os.walk + os.stat alone: {walk_s:.2f} s ({n / walk_s:.0f} obj/s)", flush=True)
    _report("local", n, list_s, import_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--storage", default="s3,local")
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    for storage in args.storage.split(","):
        with tempfile.TemporaryDirectory(prefix="import-bench-") as tmp:
            {"s3": bench_s3, "local": bench_local}[storage](args.objects, Path(tmp))


if __name__ == "__main__":
    main()
