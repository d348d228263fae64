"""Benchmark of a blockstore driver against its store's own SDK: PUT and GET of objects.

Run ``python -m bench.store_bench [--store azure|s3] [--n 50] [--size 1048576]
[--rounds 3]``. It starts the store's emulator on loopback (Azurite for ``azure``,
moto for ``s3``), then times ``--n`` PUTs and ``--n`` GETs of ``--size``-byte objects
(different keys, random data) through:

* ``driver``: this server's blockstore (``AzureBlobStore``, ``S3BlockStore``);
* ``sdk``: the store's SDK called directly (``azure-storage-blob``'s ``BlobClient``,
  boto3's ``put_object``/``get_object``), the floor the driver stands on.

Driver and SDK calls alternate object by object (so both meet the same load on the
emulator and the machine), in ``--rounds`` rounds; it prints, per case, the median over
the rounds of wall and CPU (this thread's) milliseconds per operation and MiB/s, and
the driver/sdk ratios of each operation (1.00: the driver costs nothing over the SDK).
Emulators are not the cloud: the figures compare the two clients on one machine, not
the service.

A store is one entry of ``STORES``: a context manager that starts what the store needs
and yields a :class:`Target`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lakefs_core.block.base import BlockStore, join_address


@dataclass
class Target:
    """One store under test: the driver, a namespace on it, and the SDK's own calls."""

    driver: BlockStore
    namespace: str
    sdk_put: Callable[[str, bytes], object]
    sdk_get: Callable[[str], bytes]


@contextlib.contextmanager
def azure_target() -> Iterator[Target]:
    from azure.storage.blob import BlobServiceClient

    from lakefs_core.block.azure import AzureBlobStore
    from lakefs_core.block.config import AzureConfig
    from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, azurite

    with azurite() as server:
        driver = AzureBlobStore(AzureConfig(
            storage_account=AZURITE_ACCOUNT, storage_access_key=AZURITE_KEY,
            test_endpoint_url=server.endpoint))
        service = BlobServiceClient(server.account_url, credential={
            "account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY})
        container = service.create_container("bench")
        try:
            yield Target(
                driver=driver, namespace=f"{driver.base}bench/driver",
                sdk_put=lambda key, data: container.upload_blob(f"sdk/{key}", data,
                                                                overwrite=True),
                sdk_get=lambda key: container.download_blob(f"sdk/{key}").readall())
        finally:
            service.close()
            driver.close()


@contextlib.contextmanager
def s3_target() -> Iterator[Target]:
    import boto3

    from lakefs_core.block.config import S3Config, S3Credentials
    from lakefs_core.block.s3 import S3BlockStore
    from lakefs_testing.servers import MOTO_ENV, moto

    with moto() as server:
        creds = {"aws_access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
                 "aws_secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}
        client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                              **creds)
        client.create_bucket(Bucket="bench")
        driver = S3BlockStore(S3Config(
            endpoint=server.endpoint, force_path_style=True,
            credentials=S3Credentials(access_key_id=creds["aws_access_key_id"],
                                      secret_access_key=creds["aws_secret_access_key"])))
        try:
            yield Target(
                driver=driver, namespace="s3://bench/driver",
                sdk_put=lambda key, data: client.put_object(Bucket="bench", Key=f"sdk/{key}",
                                                            Body=data),
                sdk_get=lambda key: client.get_object(Bucket="bench",
                                                      Key=f"sdk/{key}")["Body"].read())
        finally:
            driver.close()
            client.close()


#: every store the bench can run on (a new one is one more entry)
STORES: dict[str, Callable[[], contextlib.AbstractContextManager[Target]]] = {
    "azure": azure_target,
    "s3": s3_target,
}


def _interleaved(driver: Callable[[int], object], sdk: Callable[[int], object],
                 n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Wall and CPU milliseconds per call of ``driver(i)`` and of ``sdk(i)``, called in
    turn for each ``i`` in ``range(n)`` so that both meet the same load."""
    totals = [[0.0, 0.0], [0.0, 0.0]]
    for i in range(n):
        for total, fn in zip(totals, (driver, sdk), strict=True):
            wall, cpu = time.perf_counter(), time.thread_time()
            fn(i)
            total[0] += time.perf_counter() - wall
            total[1] += time.thread_time() - cpu
    (dw, dc), (sw, sc) = totals
    return (dw / n * 1e3, dc / n * 1e3), (sw / n * 1e3, sc / n * 1e3)


def run(target: Target, n: int, size: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) milliseconds per operation of each case over ``rounds``."""
    payloads = [os.urandom(size) for _ in range(n)]

    def key(i: int) -> str:
        return f"obj-{i:05d}"

    def address(i: int) -> str:
        return join_address(target.namespace, key(i))

    ops: list[tuple[str, Callable[[int], object], Callable[[int], object]]] = [
        ("PUT", lambda i: target.driver.put(address(i), payloads[i]),
         lambda i: target.sdk_put(key(i), payloads[i])),
        ("GET", lambda i: target.driver.get(address(i)), lambda i: target.sdk_get(key(i))),
    ]
    # a warm-up that also checks both clients read back what they wrote
    for _, driver, sdk in ops:
        driver(0)
        sdk(0)
    assert target.driver.get(address(0)) == payloads[0]
    assert target.sdk_get(key(0)) == payloads[0]
    samples: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for op, driver, sdk in ops:
            on_driver, on_sdk = _interleaved(driver, sdk, n)
            samples.setdefault(f"driver {op}", []).append(on_driver)
            samples.setdefault(f"sdk {op}", []).append(on_sdk)
    return {name: (statistics.median(w for w, _ in values),
                   statistics.median(c for _, c in values))
            for name, values in samples.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", choices=sorted(STORES), default="azure")
    parser.add_argument("--n", type=int, default=50, help="objects per case and round")
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per object")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with STORES[args.store]() as target:
        medians = run(target, args.n, args.size, args.rounds)
    mib = args.size / (1 << 20)
    print(f"{args.store}: {args.n} x {args.size} bytes, median of {args.rounds} rounds")
    print(f"{'case':<12} {'wall ms':>8} {'cpu ms':>8} {'MiB/s':>8}")
    for name, (wall, cpu) in medians.items():
        print(f"{name:<12} {wall:8.2f} {cpu:8.2f} {mib / (wall / 1e3):8.1f}")
    for op in ("PUT", "GET"):
        (dw, dc), (sw, sc) = medians[f"driver {op}"], medians[f"sdk {op}"]
        print(f"driver/sdk {op}: wall {dw / sw:.2f}, cpu {dc / sc:.2f}")

if __name__ == "__main__":
    main()
