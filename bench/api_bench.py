"""Latency of common REST API calls against one running server.

Run ``python -m bench.api_bench [--requests 200]``.

It starts the server (embedded database, local storage) in its own process, creates
a repository through the API, then times ``--requests`` sequential calls of each
operation from one httpx client with basic auth, after a short warm-up:

* stat: ``GET /repositories/{repo}/refs/main/objects/stat`` of a 4 KiB object;
* read 4 KiB: ``GET /repositories/{repo}/refs/main/objects``;
* upload 4 KiB: ``POST /repositories/{repo}/branches/main/objects`` (raw body);
* branch create: ``POST /repositories/{repo}/branches``.

It prints p50 and p99 in milliseconds (lakeFS publishes p50 below 10-15 ms for
these).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import httpx

from bench.gateway_bench import lakefs_server
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET

REPOSITORY = "api-bench"
OBJECT_SIZE = 4096
WARM_UP = 10


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _timed(call: Callable[[int], httpx.Response], count: int, expected: int) -> list[float]:
    for i in range(WARM_UP):
        call(-1 - i)
    samples = []
    for i in range(count):
        start = time.perf_counter()
        response = call(i)
        samples.append((time.perf_counter() - start) * 1000)
        if response.status_code != expected:
            raise RuntimeError(f"unexpected answer {response.status_code}: {response.text}")
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    count = args.requests
    payload = os.urandom(OBJECT_SIZE)

    with lakefs_server() as endpoint, httpx.Client(
            base_url=f"{endpoint}/api/v1", auth=(ADMIN_KEY, ADMIN_SECRET), timeout=60) as api:
        created = api.post("/repositories", json={
            "name": REPOSITORY, "storage_namespace": f"local://{REPOSITORY}",
            "default_branch": "main"})
        created.raise_for_status()
        objects = f"/repositories/{REPOSITORY}/branches/main/objects"
        for i in range(-WARM_UP, count):
            api.post(objects, params={"path": f"read/{i}"}, content=payload,
                     headers={"Content-Type": "application/octet-stream"}).raise_for_status()
        refs = f"/repositories/{REPOSITORY}/refs/main/objects"

        def read(i: int) -> httpx.Response:
            response = api.get(refs, params={"path": f"read/{i}"})
            if response.content != payload:
                raise RuntimeError("read returned other bytes")
            return response

        results = {
            "stat": _timed(lambda i: api.get(f"{refs}/stat", params={"path": f"read/{i}"}),
                           count, 200),
            "read 4 KiB": _timed(read, count, 200),
            "upload 4 KiB": _timed(
                lambda i: api.post(objects, params={"path": f"upload/{i}"}, content=payload,
                                   headers={"Content-Type": "application/octet-stream"}),
                count, 201),
            "branch create": _timed(
                lambda i: api.post(f"/repositories/{REPOSITORY}/branches",
                                   json={"name": f"bench-{i + WARM_UP}", "source": "main"}),
                count, 201),
        }

    print(f"REST API latency, {count} sequential requests each (ms)")
    for name, samples in results.items():
        print(f"{name:14s} p50 {statistics.median(samples):7.2f}  "
              f"p99 {_percentile(samples, 0.99):7.2f}")


if __name__ == "__main__":
    main()
