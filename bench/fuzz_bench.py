"""Property-based fuzzing of the REST and replication APIs, then a consistency check.

Run ``python -m bench.fuzz_bench [--requests 10000] [--seed 0] [--database sqlite|postgres]
[--trace]``.

It starts two regions on loopback (servers and replication sidecars over SQLite or a
throwaway PostgreSQL), seeds repositories, branches, commits, tags, objects, users,
groups, policies and a mirror, and sends ``--requests`` requests that Schemathesis
generates from the server's ``/api/v1`` OpenAPI document and the replication API's,
as the admin and as a read-only user (see :mod:`lakefs_testing.fuzzing`). It prints
the requests made, the status-code histogram, the 5xx count with the requests that
caused them, failed checks by name, the consistency findings of both regions
(half-changed or orphaned state, see :mod:`lakefs_testing.consistency`) and the time.
``--trace`` prints every request and its status to stderr.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lakefs_testing.fuzzing import Fuzzer, fuzz_regions, print_trace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--trace", action="store_true", help="print every request")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fuzz-bench-") as root, \
            fuzz_regions(Path(root), args.database) as (east, west):
        fuzzer = Fuzzer(east, west, seed=args.seed, trace=print_trace if args.trace else None)
        report = fuzzer.run(args.requests)
    print(f"database: {args.database}, seed: {args.seed}")
    print(report.summary())


if __name__ == "__main__":
    main()
