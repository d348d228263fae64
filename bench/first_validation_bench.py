"""Benchmark of a mirror's first validation: proving an N-object commit present at once.

Run ``python -m bench.first_validation_bench [--local 1000000] [--s3 20000]
[--concurrency 16]`` (``0`` skips a store).

For each store it writes N objects under a mirror namespace the way the server lays
them out (``data/<20 hex>/<32 hex>``: one directory per object on the local store),
builds a metarange of N entries naming them (``RangeManager.apply``), and then, in the
same run:

* ``validate``: a fresh :class:`~lakefs_core.graveler.presence.CommitValidator` over a
  :class:`~lakefs_core.graveler.presence.CountingStore` validates the commit with no
  base (a first mirror): wall time, store requests (a listing counts one per page of
  1,000 keys) and requests per 1,000 objects;
* ``list``: the same objects listed directly, without the product: ``os.scandir``
  over the namespace's directory tree (with each file's size), or boto3
  ``list_objects_v2`` page by page (1,000 keys a page);
* ``stat``: the cost of the previous way (one stat per object): its requests, and the
  time of the stats alone (without reading the ranges, which both ways do), measured
  on a sample of 2,000 objects at the same concurrency and scaled to N.

It prints one line per store with the ratio ``validate / list`` (the goal is at most
1.5). The S3 store is moto in server mode on loopback, in a child process. moto walks
and sorts the whole bucket for every listing page, so listing N keys costs N**2 / 1,000
key visits (100,000 keys took 64 s here; a million would take some 40 minutes, for the
validator and for boto3 alike);
by default its listings bisect a sorted index instead (:mod:`bench.moto_index`, the
same answers), and ``--moto-listing plain`` keeps moto's own. moto also takes a few
milliseconds a PUT, so the S3 objects are put into its memory directly, in its process
(``--s3-load put`` writes them with a request each); the metarange, the validation,
the listing and the stats go over HTTP as always.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

import boto3
from botocore.config import Config

from bench.gateway_bench import _run_moto, child_process
from bench.moto_index import index_listings
from lakefs_core.block.base import BlockStore, join_address
from lakefs_core.block.config import S3Config, S3Credentials
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.block.s3 import S3BlockStore
from lakefs_core.graveler import Entry, EntryRecord, RangeManager
from lakefs_core.graveler.presence import CommitValidator, CountingStore
from lakefs_testing.servers import MOTO_ENV

BATCH = 50_000
SAMPLE = 2_000


@dataclass
class Row:
    store: str
    n: int
    validate_s: float
    requests: int
    list_s: float
    stat_requests: int
    stat_s: float

    def line(self) -> str:
        ratio = self.validate_s / self.list_s if self.list_s else float("nan")
        return (f"{self.store:<6} {self.n:>9} {self.validate_s:>10.2f} {self.list_s:>8.2f} "
                f"{ratio:>6.2f} {self.requests:>9} {1000 * self.requests / self.n:>8.2f} "
                f"{self.stat_requests:>9} {self.stat_s:>9.1f}")


HEADER = (f"{'store':<6} {'N':>9} {'validate s':>10} {'list s':>8} {'ratio':>6} "
          f"{'requests':>9} {'req/1000':>8} {'stat req':>9} {'stat s~':>9}")


def addresses(n: int, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """(relative address, content) of N small objects, as the server names data."""
    for i in range(n):
        yield (f"data/{rng.getrandbits(80):020x}/{rng.getrandbits(128):032x}",
               f"object {i}".encode())


def _record(i: int, address: str, size: int, etag: str) -> EntryRecord:
    return EntryRecord(f"table/part={i % 100:03d}/file-{i:09d}.parquet",
                       Entry(address=address, size=size, etag=etag, mtime=1_700_000_000.0))


def build(store: BlockStore, namespace: str, n: int, threads: int, *,
          loaded: bool = False) -> str:
    """Write N objects (unless ``loaded``: already there, see :func:`_run_moto_with`)
    and the metarange naming them; its id."""
    rng = random.Random(n)
    records: list[EntryRecord] = []

    def put(item: tuple[int, tuple[str, bytes]]) -> EntryRecord:
        i, (address, data) = item
        if loaded:  # the etag moto gives a single-part object: its MD5
            return _record(i, address, len(data), hashlib.md5(data).hexdigest())
        stat = store.put(join_address(namespace, address), data)
        return _record(i, address, stat.size, stat.etag)

    started = time.monotonic()
    if loaded:
        records = [put(item) for item in enumerate(addresses(n, rng))]
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            records = list(pool.map(put, enumerate(addresses(n, rng)), chunksize=256))
    records.sort(key=lambda r: r.path)
    ranges = RangeManager(store, namespace)
    mr = ranges.empty_metarange()
    for start in range(0, n, BATCH):
        mr = ranges.apply(mr, records[start:start + BATCH]).metarange_id
    logging.info("wrote %d objects and their metarange in %.1fs", n,
                 time.monotonic() - started)
    return mr


def validate(store: BlockStore, namespace: str, mr: str, concurrency: int
             ) -> tuple[float, int]:
    counting = CountingStore(store)
    validator = CommitValidator(counting, namespace, concurrency=concurrency)
    started = time.monotonic()
    result = validator.validate(mr, None)
    elapsed = time.monotonic() - started
    if not result.complete:
        raise SystemExit(f"validation incomplete: {result.missing[:3]}")
    return elapsed, counting.requests


def stat_sample(store: BlockStore, namespace: str, mr: str, n: int, concurrency: int
                ) -> tuple[int, float]:
    """(requests, seconds) of the one-stat-per-object way, scaled from a sample."""
    ranges = RangeManager(store, namespace)
    infos = ranges.get_metarange(mr).ranges
    sample: list[str] = []
    for info in infos:
        sample += [join_address(namespace, r.entry.address)
                   for r in ranges.read_range(info.id) if r.entry is not None]
        if len(sample) >= SAMPLE:
            break
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(store.stat, sample))
    per = (time.monotonic() - started) / len(sample)
    return n + len(infos) + 1, per * n


def scandir_all(path: str) -> int:
    count = 0
    with os.scandir(path) as it:
        for item in it:
            if item.is_dir():
                count += scandir_all(item.path)
            else:
                item.stat()
                count += 1
    return count


def run_local(n: int, concurrency: int, workdir: str) -> Row:
    root = os.path.join(workdir, "local")
    store = LocalBlockStore(root)
    namespace = "local://mirror"
    mr = build(store, namespace, n, 4)
    data_dir = os.path.join(root, "mirror", "data")
    scandir_all(data_dir)  # same page cache for both
    validate_s, requests = validate(store, namespace, mr, concurrency)
    started = time.monotonic()
    listed = scandir_all(data_dir)
    list_s = time.monotonic() - started
    assert listed == n, listed
    stat_requests, stat_s = stat_sample(store, namespace, mr, n, concurrency)
    return Row("local", n, validate_s, requests, list_s, stat_requests, stat_s)


def _run_moto_with(listing: str, load: int, queue: Any, stop: Event) -> None:
    """moto (in a child process), its listings indexed unless ``listing`` is "plain";
    with ``load`` objects (:func:`addresses`) already in ``s3://mirror/ns/``, put into
    moto's memory directly (without a request each: moto takes milliseconds a put)."""
    if listing != "plain":
        index_listings()
    if load:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
        backend.create_bucket("mirror", MOTO_ENV["AWS_DEFAULT_REGION"])
        for address, data in addresses(load, random.Random(load)):
            backend.put_object("mirror", f"ns/{address}", data, disable_notification=True)
    _run_moto(queue, stop)


def run_s3(n: int, concurrency: int, moto_listing: str, load: str) -> Row:
    loaded = load == "direct"
    started = time.monotonic()
    with child_process(_run_moto_with, moto_listing, n if loaded else 0,
                       ready_timeout=120 + n / 1000) as endpoint:
        if loaded:
            logging.info("loaded %d objects into moto in %.1fs", n, time.monotonic() - started)
        config = S3Config(endpoint=endpoint, force_path_style=True,
                          region=MOTO_ENV["AWS_DEFAULT_REGION"],
                          credentials=S3Credentials(access_key_id="testing",
                                                    secret_access_key="testing"))
        store = S3BlockStore(config)
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing",
                              region_name=MOTO_ENV["AWS_DEFAULT_REGION"],
                              config=Config(s3={"addressing_style": "path"}))
        if not loaded:
            client.create_bucket(Bucket="mirror")
        namespace = "s3://mirror/ns"
        try:
            mr = build(store, namespace, n, 8, loaded=loaded)
            validate_s, requests = validate(store, namespace, mr, concurrency)
            started = time.monotonic()
            listed = 0
            for page in client.get_paginator("list_objects_v2").paginate(
                    Bucket="mirror", Prefix="ns/data/", PaginationConfig={"PageSize": 1000}):
                listed += len(page.get("Contents", []))
            list_s = time.monotonic() - started
            assert listed == n, listed
            stat_requests, stat_s = stat_sample(store, namespace, mr, n, concurrency)
        finally:
            store.close()
    return Row("s3", n, validate_s, requests, list_s, stat_requests, stat_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", type=int, default=1_000_000, help="objects (0: skip)")
    parser.add_argument("--s3", type=int, default=20_000, help="objects on moto (0: skip)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--moto-listing", choices=("indexed", "plain"), default="indexed",
                        help="moto's listings: from a sorted index (default) or its own")
    parser.add_argument("--s3-load", choices=("direct", "put"), default="direct",
                        help="the S3 objects: put into moto's memory directly (default) "
                             "or with a PUT request each")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    rows = []
    workdir = tempfile.mkdtemp(prefix="first-validation-")
    try:
        if args.local:
            rows.append(run_local(args.local, args.concurrency, workdir))
            print(rows[-1].line(), flush=True)
        if args.s3:
            rows.append(run_s3(args.s3, args.concurrency, args.moto_listing, args.s3_load))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(HEADER)
    for row in rows:
        print(row.line())
    print("validate: first validation (no base); list: the same objects listed directly; "
          "stat: one request per object (requests; seconds of the stats alone, sampled); "
          f"moto's listings: {args.moto_listing}; S3 objects loaded: {args.s3_load}")


if __name__ == "__main__":
    main()
