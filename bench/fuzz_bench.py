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

Then ``--hook-rounds`` rounds of generated action files and Lua scripts (hostile ones
among them) are committed to a third server with short hook bounds (see
:mod:`lakefs_testing.hook_fuzzing`): it prints the hooks and fragments generated, the
commits' statuses, and the violations found (answers other than 201/412, a stalled
``/_health``, a leaked server secret, a request to a denied address).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lakefs_testing.fuzzing import Fuzzer, fuzz_regions, print_trace
from lakefs_testing.hook_fuzzing import HookFuzzer, hook_fuzz_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--trace", action="store_true", help="print every request")
    parser.add_argument("--hook-rounds", type=int, default=200,
                        help="generated action files committed (0: none)")
    args = parser.parse_args(argv)
    if args.requests:
        _fuzz_apis(args)
    if args.hook_rounds:
        with tempfile.TemporaryDirectory(prefix="fuzz-hooks-") as root, \
                hook_fuzz_server(Path(root)) as (server, receiver, denied):
            report = HookFuzzer(server, receiver, denied, seed=args.seed).run(args.hook_rounds)
        print(f"hooks, seed: {args.seed}")
        print(report.summary())


def _fuzz_apis(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-bench-") as root, \
            fuzz_regions(Path(root), args.database) as (east, west):
        fuzzer = Fuzzer(east, west, seed=args.seed, trace=print_trace if args.trace else None)
        report = fuzzer.run(args.requests)
    print(f"database: {args.database}, seed: {args.seed}")
    print(report.summary())


if __name__ == "__main__":
    main()
