"""The Cloud Storage blockstore's cost over google-cloud-storage used directly.

Run ``python -m bench.gcs_bench [--objects 100] [--size-mib 1] [--rounds 3]``.

It starts gcp-storage-emulator in its own process on loopback, then, from this
process and one thread, PUTs ``--objects`` objects of ``--size-mib`` MiB and GETs them
back, once through the ``gs`` store (``GSBlockStore.put``/``get``) and once with
google-cloud-storage's own calls (``Blob.upload_from_string``/``download_as_bytes``,
each with its defaults), alternating for ``--rounds`` rounds. It prints the median
time per operation of each, and the ratio store / direct (1.00: no overhead).

The emulator is a single-threaded Python server that keeps objects in memory, so most
of each figure is the emulator's own time; what the ratio shows is what the store
adds on top of the library (address parsing, the stat it returns, error mapping), not
what Cloud Storage would take.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from lakefs_core.block.config import GSConfig
from lakefs_core.block.gs import GSBlockStore
from lakefs_testing.gcs import gcs_emulator

MIB = 1 << 20
BUCKET = "gcs-bench"


def _timed(op: Callable[[int], object], count: int) -> float:
    """Seconds per operation of ``op(0..count-1)``."""
    start = time.perf_counter()
    for i in range(count):
        op(i)
    return (time.perf_counter() - start) / count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100)
    parser.add_argument("--size-mib", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    count = args.objects
    payload = os.urandom(args.size_mib * MIB)

    with gcs_emulator() as emulator:
        store = GSBlockStore(GSConfig(endpoint=emulator.endpoint, anonymous=True))
        client = store.client
        bucket = client.create_bucket(BUCKET)
        times: dict[tuple[str, str], list[float]] = {}

        def record(way: str, op: str, seconds: float) -> None:
            times.setdefault((way, op), []).append(seconds)

        try:
            for rnd in range(args.rounds):
                def store_put(i: int, rnd: int = rnd) -> None:
                    store.put(f"gs://{BUCKET}/store/{rnd}/{i:05d}", payload)

                def store_get(i: int, rnd: int = rnd) -> None:
                    assert len(store.get(f"gs://{BUCKET}/store/{rnd}/{i:05d}")) == len(payload)

                def direct_put(i: int, rnd: int = rnd) -> None:
                    bucket.blob(f"direct/{rnd}/{i:05d}").upload_from_string(payload)

                def direct_get(i: int, rnd: int = rnd) -> None:
                    data = bucket.blob(f"direct/{rnd}/{i:05d}").download_as_bytes()
                    assert len(data) == len(payload)

                record("store", "PUT", _timed(store_put, count))
                record("direct", "PUT", _timed(direct_put, count))
                record("store", "GET", _timed(store_get, count))
                record("direct", "GET", _timed(direct_get, count))
        finally:
            store.close()

    print(f"{count} objects of {args.size_mib} MiB, {args.rounds} rounds, one thread, "
          f"gcp-storage-emulator on loopback (median per operation)")
    print(f"{'op':<4} {'gs store':>10} {'direct':>10} {'store/direct':>13}")
    for op in ("PUT", "GET"):
        ours = statistics.median(times[("store", op)])
        direct = statistics.median(times[("direct", op)])
        print(f"{op:<4} {ours * 1000:>8.2f}ms {direct * 1000:>8.2f}ms {ours / direct:>13.2f}")


if __name__ == "__main__":
    main()
