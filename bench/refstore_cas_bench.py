"""Benchmark of branch compare-and-swap: DynamoDB (moto) against PostgreSQL.

Run ``python -m bench.refstore_cas_bench [--n 300] [--threads 4]``.
It starts a throwaway PostgreSQL cluster (:mod:`lakefs_testing.servers`) and a moto
server in a process of its own (so that its work does not share this process's
interpreter), opens a refstore on each, and times branch moves as the engine makes
them: read the branch, then ``update_branch`` (a conditional write) from what was read,
reading again and retrying when another writer moved it first.

Cases, per backend:

* ``one writer``: ``--n`` moves of one branch by one thread;
* ``contended``: ``--threads`` threads moving the same branch, ``--n`` moves in all
  (each lost race is read again and retried; the conflicts are counted);
* ``parallel``: ``--threads`` threads each moving its own branch, ``--n`` moves in all.

It prints the successful compare-and-swaps per second of each case and backend, and
the DynamoDB / PostgreSQL ratio. Both servers are on loopback on this machine: the
figures compare the stores' code paths and servers, not a network; moto is an
emulator, slower than DynamoDB itself, and a real table adds a network round trip
(a few milliseconds) to every request.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from lakefs_core.errors import BranchChangedError
from lakefs_core.graveler.model import Branch, Repository
from lakefs_core.refstore.base import RefStore
from lakefs_core.refstore.dynamodb import DynamoDBRefStore
from lakefs_core.refstore.sql import SQLRefStore
from lakefs_testing.servers import MOTO_ENV, free_port, postgres

REPO = "bench"


@contextlib.contextmanager
def moto_process() -> Iterator[str]:
    """A moto server in its own process; its endpoint."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                             "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **MOTO_ENV})
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("moto did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _setup(store: RefStore, branches: int) -> None:
    repo = Repository(id=REPO, storage_namespace="local://bench", default_branch="main",
                      creation_date=1_700_000_000)
    store.create_repository(repo, Branch("main", "0", "t-main"))
    for i in range(branches):
        store.create_branch(REPO, Branch(f"b{i}", "0", f"t{i}"))


def _move(store: RefStore, name: str, conflicts: list[int]) -> None:
    """One successful compare-and-swap of ``name`` (its commit id counts the moves)."""
    while True:
        seen = store.get_branch(REPO, name)
        try:
            store.update_branch(REPO, seen, replace(seen, commit_id=str(int(seen.commit_id) + 1)))
            return
        except BranchChangedError:
            conflicts.append(1)


def _run(store: RefStore, threads: int, n: int, branch_of: Callable[[int], str]
         ) -> tuple[float, int]:
    """Moves per second over ``n`` moves by ``threads`` threads; the conflicts met."""
    conflicts: list[int] = []
    per_thread = n // threads
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        barrier.wait()
        for _ in range(per_thread):
            _move(store, branch_of(t), conflicts)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    return per_thread * threads / (time.perf_counter() - start), len(conflicts)


def bench(store: RefStore, n: int, threads: int) -> dict[str, tuple[float, int]]:
    _setup(store, threads)
    results = {"one writer": _run(store, 1, n, lambda _t: "main"),
               "contended": _run(store, threads, n, lambda _t: "main"),
               "parallel": _run(store, threads, n, lambda t: f"b{t}")}
    expected = n + (n // threads) * threads  # every move of main landed exactly once
    assert store.get_branch(REPO, "main").commit_id == str(expected)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="moves per case")
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    figures: dict[str, dict[str, tuple[float, int]]] = {}
    with postgres() as pg, SQLRefStore(pg.create_database("cas_bench")) as store:
        figures["postgres"] = bench(store, args.n, args.threads)
    with moto_process() as endpoint, DynamoDBRefStore(
            "cas-bench", endpoint=endpoint, region=MOTO_ENV["AWS_DEFAULT_REGION"],
            access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
            secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"]) as store:
        figures["dynamodb"] = bench(store, args.n, args.threads)

    print(f"branch compare-and-swap, {args.n} moves per case, {args.threads} threads "
          "(contended, parallel)")
    print(f"{'case':<12} {'postgres CAS/s':>15} {'dynamodb CAS/s':>15} {'ratio':>7}"
          f" {'conflicts pg/ddb':>17}")
    for case in figures["postgres"]:
        (pg_rate, pg_conf), (ddb_rate, ddb_conf) = figures["postgres"][case], figures[
            "dynamodb"][case]
        print(f"{case:<12} {pg_rate:>15.0f} {ddb_rate:>15.0f} {ddb_rate / pg_rate:>7.2f}"
              f" {pg_conf:>8}/{ddb_conf:<8}")


if __name__ == "__main__":
    main()
