"""S3 gateway throughput against the object store it sits on.

Run ``python -m bench.gateway_bench [--objects 200] [--size-mib 1] [--threads 4]
[--rounds 3]``.

It starts, each in its own process so that no two share an interpreter lock:

* a moto server (S3) on loopback, via ``lakefs_testing.servers``;
* the lakeFS-compatible server on loopback with an S3 blockstore on that moto server,
  and one repository whose storage namespace is a prefix of a moto bucket.

Then, from this process, with boto3 (its default settings, a few threads sharing one
client), it PUTs and GETs ``--objects`` objects of ``--size-mib`` MiB once directly
on the moto bucket and once through the gateway (bucket = repository, key =
``main/<path>``), for ``--rounds`` rounds, and prints the median MB/s of each and
the ratio gateway / direct (target: at least 0.6).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

import boto3
from botocore.config import Config

from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.servers import MOTO_ENV

MIB = 1 << 20
REPOSITORY = "bench"


# --- servers in child processes ----------------------------------------------------------
def _run_moto(queue: Any, stop: Event) -> None:
    from lakefs_testing.servers import start_moto

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = start_moto()
    queue.put(server.endpoint)
    stop.wait()
    server.stop()


def _run_server(data_dir: str, env: Mapping[str, str], namespace: str, queue: Any,
                stop: Event) -> None:
    from lakefs_testing.live_server import live_server

    os.environ.update(MOTO_ENV)
    with live_server(data_dir, env) as server:
        if namespace:
            server.services.graveler.create_repository(REPOSITORY, namespace)
        queue.put(server.endpoint)
        stop.wait()


@contextlib.contextmanager
def child_process(target: Callable[..., None], *args: Any,
                  ready_timeout: float = 120) -> Iterator[str]:
    """Run ``target(*args, queue, stop)`` in a spawned process; yield what it reports
    (within ``ready_timeout`` seconds)."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    stop = ctx.Event()
    process = ctx.Process(target=target, args=(*args, queue, stop), daemon=True)
    process.start()
    try:
        yield str(queue.get(timeout=ready_timeout))
    finally:
        stop.set()
        process.join(timeout=60)
        if process.is_alive():
            process.terminate()
            process.join()


@contextlib.contextmanager
def lakefs_server(env: Mapping[str, str] | None = None, namespace: str = "") -> Iterator[str]:
    """A lakeFS-compatible server in a child process (its endpoint); local storage
    unless ``env`` says otherwise. ``namespace`` creates repository ``bench`` there."""
    with tempfile.TemporaryDirectory(prefix="lakefs-bench-") as data_dir, \
            child_process(_run_server, data_dir, dict(env or {}), namespace) as endpoint:
        yield endpoint


# --- measurement -----------------------------------------------------------------------------
def s3_client(endpoint: str, key: str, secret: str, threads: int) -> Any:
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
        region_name=MOTO_ENV["AWS_DEFAULT_REGION"],
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=threads * 2,
                      retries={"max_attempts": 3}))


@dataclass
class Target:
    """One place to PUT and GET objects: a bucket and a key prefix on an endpoint."""

    name: str
    client: Any
    bucket: str
    prefix: str

    def put(self, index: int, payload: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"{self.prefix}{index:05d}",
                               Body=payload)

    def get(self, index: int) -> int:
        body = self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}{index:05d}")["Body"]
        return len(body.read())


def _timed(threads: int, work: Callable[[int], object], count: int) -> float:
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(work, range(count)))
        return time.perf_counter() - start


def measure(target: Target, payload: bytes, objects: int, threads: int) -> tuple[float, float]:
    """MB/s of PUT then GET of ``objects`` objects of ``payload``."""
    put_seconds = _timed(threads, lambda i: target.put(i, payload), objects)
    sizes: list[int] = []
    get_seconds = _timed(threads, lambda i: sizes.append(target.get(i)), objects)
    if sizes != [len(payload)] * objects:
        raise RuntimeError(f"{target.name}: a GET returned the wrong size")
    megabytes = objects * len(payload) / 1e6
    return megabytes / put_seconds, megabytes / get_seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--size-mib", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.update(MOTO_ENV)
    payload = os.urandom(int(args.size_mib * MIB))
    bucket = "gateway-bench"

    with child_process(_run_moto) as moto_endpoint:
        direct_client = s3_client(moto_endpoint, MOTO_ENV["AWS_ACCESS_KEY_ID"],
                                  MOTO_ENV["AWS_SECRET_ACCESS_KEY"], args.threads)
        direct_client.create_bucket(Bucket=bucket)
        env = {
            "LAKEFS_BLOCKSTORE_TYPE": "s3",
            "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
            "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
            "LAKEFS_BLOCKSTORE_S3_REGION": MOTO_ENV["AWS_DEFAULT_REGION"],
            "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": MOTO_ENV["AWS_ACCESS_KEY_ID"],
            "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY":
                MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
        }
        with lakefs_server(env, f"s3://{bucket}/repository") as endpoint:
            targets = [
                Target("direct", direct_client, bucket, "direct/"),
                Target("gateway", s3_client(endpoint, ADMIN_KEY, ADMIN_SECRET, args.threads),
                       REPOSITORY, "main/objects/"),
            ]
            for target in targets:  # warm up connections and code paths
                measure(target, payload, min(8, args.objects), args.threads)
            results: dict[str, list[tuple[float, float]]] = {t.name: [] for t in targets}
            for _ in range(args.rounds):
                for target in targets:
                    results[target.name].append(
                        measure(target, payload, args.objects, args.threads))

    print(f"S3 throughput, {args.objects} objects of {args.size_mib:g} MiB, "
          f"{args.threads} threads, median of {args.rounds} rounds (MB/s)")
    medians = {name: (statistics.median(r[0] for r in runs),
                      statistics.median(r[1] for r in runs))
               for name, runs in results.items()}
    for index, operation in enumerate(("PUT", "GET")):
        direct, gateway = medians["direct"][index], medians["gateway"][index]
        print(f"{operation}: direct {direct:8.1f}  gateway {gateway:8.1f}  "
              f"ratio gateway/direct {gateway / direct:5.2f}")


if __name__ == "__main__":
    main()
