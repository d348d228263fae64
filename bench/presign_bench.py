"""Data through pre-signed URLs versus data through the server, with the lakefs SDK.

Run ``python -m bench.presign_bench [--objects 200] [--size-mib 1] [--threads 4]
[--rounds 3]``.

It starts, each in its own process: a moto server (S3) on loopback, and the
lakeFS-compatible server with an S3 blockstore on it and one repository in a moto
bucket. Then, from this process, the official ``lakefs`` SDK (one client, a few
threads) writes ``--objects`` objects of ``--size-mib`` MiB and reads them back,
once with ``pre_sign=False`` (the bytes pass through the server) and once with
``pre_sign=True`` (the server only signs URLs; the bytes go between the SDK and
moto), for ``--rounds`` rounds. It prints, per mode and direction, the median MB/s
and the server process's CPU time per MiB moved (user + system, read from
``/proc/<pid>/stat``), then the throughput ratio pre-signed / proxied.

moto on loopback is slower than S3 and shares the machine's cores with everything
else, so the throughput ratio says little about a real store. The server's CPU is
the figure that carries over: a pre-signed transfer costs it a fixed amount per
object (the SDK's pre-signed upload makes three calls: it reads the repository for
its storage id, asks ``staging/backing``, then links), a proxied one an amount per
byte; ``--size-mib`` shows where the two cross.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from typing import Any

import boto3
import lakefs
from lakefs.client import Client

from bench.gateway_bench import _run_moto, child_process
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.servers import MOTO_ENV

MIB = 1 << 20
REPOSITORY = "presign-bench"
BUCKET = "presign-bench"
_TICK = os.sysconf("SC_CLK_TCK")


def _run_server(data_dir: str, env: Mapping[str, str], queue: Any, stop: Event) -> None:
    from lakefs_testing.live_server import live_server

    os.environ.update(MOTO_ENV)
    with live_server(data_dir, env) as server:
        queue.put(f"{server.endpoint} {os.getpid()}")
        stop.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (every thread of it)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


@dataclass
class Figures:
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _measure(pid: int, threads: int, work: Callable[[int], object], count: int,
             figures: Figures) -> None:
    cpu = cpu_seconds(pid)
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(work, range(count)))
        figures.seconds.append(time.perf_counter() - start)
    figures.cpu.append(cpu_seconds(pid) - cpu)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--size-mib", type=int, default=1)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    count, size = args.objects, args.size_mib * MIB
    payload = os.urandom(size)
    import tempfile

    with child_process(_run_moto) as moto, \
            tempfile.TemporaryDirectory(prefix="presign-bench-") as data_dir:
        boto3.client("s3", endpoint_url=moto, region_name=MOTO_ENV["AWS_DEFAULT_REGION"],
                     aws_access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"]
                     ).create_bucket(Bucket=BUCKET)
        env = {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto,
               "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
               "LAKEFS_BLOCKSTORE_S3_REGION": MOTO_ENV["AWS_DEFAULT_REGION"],
               "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": MOTO_ENV["AWS_ACCESS_KEY_ID"],
               "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY":
                   MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}
        with child_process(_run_server, data_dir, env) as reported:
            endpoint, pid_text = reported.split()
            pid = int(pid_text)
            client = Client(host=endpoint, username=ADMIN_KEY, password=ADMIN_SECRET)
            repo = lakefs.Repository(REPOSITORY, client=client).create(
                storage_namespace=f"s3://{BUCKET}/{REPOSITORY}")
            branch = repo.branch("main")
            figures = {(mode, op): Figures() for mode in (False, True)
                       for op in ("write", "read")}
            for rnd in range(args.rounds):
                for pre_sign in (False, True):
                    prefix = f"r{rnd}-{'presigned' if pre_sign else 'proxied'}"

                    def write(i: int, pre_sign: bool = pre_sign, prefix: str = prefix) -> None:
                        branch.object(f"{prefix}/{i:05d}").upload(payload, pre_sign=pre_sign)

                    def read(i: int, pre_sign: bool = pre_sign, prefix: str = prefix) -> None:
                        data = branch.object(f"{prefix}/{i:05d}").reader(
                            pre_sign=pre_sign).read()
                        if len(data) != size:
                            raise RuntimeError(f"read {len(data)} bytes, wrote {size}")

                    _measure(pid, args.threads, write, count, figures[(pre_sign, "write")])
                    _measure(pid, args.threads, read, count, figures[(pre_sign, "read")])

    mib = count * size / MIB
    print(f"{count} objects x {args.size_mib} MiB, {args.threads} threads, "
          f"{args.rounds} rounds (median)")
    rates = {}
    for (pre_sign, op), fig in figures.items():
        seconds = statistics.median(fig.seconds)
        rates[(pre_sign, op)] = count * size / 1e6 / seconds
        print(f"  {op:5} {'pre-signed' if pre_sign else 'proxied':10} "
              f"{rates[(pre_sign, op)]:8.1f} MB/s   "
              f"server CPU {statistics.median(fig.cpu) / mib * 1000:7.2f} ms/MiB")
    for op in ("write", "read"):
        print(f"  {op}: pre-signed / proxied throughput = "
              f"{rates[(True, op)] / rates[(False, op)]:.2f}")


if __name__ == "__main__":
    main()
