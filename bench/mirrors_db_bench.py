"""Benchmark of the mirrors table: conditional updates per second and watch() delay.

Run ``python -m bench.mirrors_db_bench [--backends sqlite,postgres,dynamodb]
[--seconds 3] [--events 200] [--writers 4]``. It starts its own PostgreSQL and moto
servers (``lakefs_testing.servers``) and a SQLite file in a temporary directory, then for
each backend measures:

* ``cas 1 writer``: one thread doing read-free compare-and-swap updates of one
  mirror (each write names the version the previous one returned);
* ``cas N writers, N rows``: N threads, each updating its own branch progress row;
* ``cas N writers, 1 row``: N threads doing read / CAS-write / retry on one row;
  successful updates per second and the share of attempts that lost the race;
* ``watch delay``: time from the start of a write to the arrival of its event
  through ``watch()`` (default poll intervals: SQLite 50 ms, DynamoDB 250 ms;
  PostgreSQL LISTEN/NOTIFY does not poll), p50 and p99 over ``--events`` writes.

DynamoDB figures are for moto on this machine, which is far slower than DynamoDB;
they show the cost of the client path, not of the service.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from lakefs_testing.servers import MOTO_ENV, start_moto, start_postgres
from mirrors_db import (
    MirrorBranch,
    MirrorSpec,
    MirrorsTable,
    MirrorState,
    VersionConflictError,
    open_mirrors_table,
)

ORG = "bench"


def cas_single_writer(table: MirrorsTable, seconds: float) -> float:
    """Updates per second of one writer chaining versions on one mirror."""
    mirror = table.update_mirror(
        table.create_mirror(_spec("single")).with_state(MirrorState.ACTIVE))
    done = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        mirror = table.update_mirror(mirror.with_state(MirrorState.ACTIVE, f"note {done}"))
        done += 1
    return done / (time.perf_counter() - start)


def cas_parallel_rows(table: MirrorsTable, writers: int, seconds: float) -> float:
    """Updates per second of ``writers`` threads, each on its own row."""
    mirror = table.create_mirror(_spec("rows"))
    rows = [table.put_branch_progress(MirrorBranch(ORG, mirror.id, f"b{i}"))
            for i in range(writers)]
    counts = [0] * writers

    def work(i: int, deadline: float) -> None:
        row = rows[i]
        while time.perf_counter() < deadline:
            row = table.put_branch_progress(replace(row, missing_objects=row.missing_objects + 1))
            counts[i] += 1

    elapsed = _run_threads(writers, seconds, work)
    return sum(counts) / elapsed


def cas_one_row(table: MirrorsTable, writers: int, seconds: float) -> tuple[float, float]:
    """Successful updates per second and lost-race share, ``writers`` threads, one row."""
    mirror = table.create_mirror(_spec("contended"))
    table.put_branch_progress(MirrorBranch(ORG, mirror.id, "main"))
    wins = [0] * writers
    losses = [0] * writers

    def work(i: int, deadline: float) -> None:
        while time.perf_counter() < deadline:
            row = table.get_branch_progress(ORG, mirror.id, "main")
            try:
                table.put_branch_progress(replace(row, missing_objects=row.missing_objects + 1))
                wins[i] += 1
            except VersionConflictError:
                losses[i] += 1

    elapsed = _run_threads(writers, seconds, work)
    attempts = sum(wins) + sum(losses)
    return sum(wins) / elapsed, (sum(losses) / attempts if attempts else 0.0)


def watch_delay(table: MirrorsTable, events: int) -> tuple[float, float]:
    """p50 and p99 seconds from the start of a write to its event."""
    mirror = table.update_mirror(
        table.create_mirror(_spec("watched")).with_state(MirrorState.ACTIVE))
    delays = []
    with table.watch(ORG) as feed:
        for n in range(events):
            start = time.perf_counter()
            mirror = table.update_mirror(mirror.with_state(MirrorState.ACTIVE, f"event {n}"))
            while True:
                event = feed.get(timeout=30)
                if event is None:
                    raise RuntimeError(f"no event for version {mirror.version} within 30 s")
                if event.row == mirror:
                    break
            delays.append(time.perf_counter() - start)
    quantiles = statistics.quantiles(delays, n=100)
    return statistics.median(delays), quantiles[98]


def _spec(tag: str) -> MirrorSpec:
    return MirrorSpec(ORG, f"mirror-{tag}", "us-east-1", "repo", "us-west-2",
                      f"s3://bench/{tag}")


def _run_threads(count: int, seconds: float, work: Callable[[int, float], None]) -> float:
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i, deadline)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


@contextlib.contextmanager
def backend_configs(names: list[str]) -> Iterator[dict[str, dict[str, Any]]]:
    """Start what the chosen backends need; yield their mirrors_database sections."""
    with contextlib.ExitStack() as stack:
        configs: dict[str, dict[str, Any]] = {}
        if "sqlite" in names:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="mirrors-bench-"))
            configs["sqlite"] = {"type": "sqlite", "sqlite": {"path": f"{tmp}/mirrors.db"}}
        if "postgres" in names:
            pg = start_postgres()
            stack.callback(pg.stop)
            url = pg.create_database("mirrors_bench")
            configs["postgres"] = {"type": "postgres", "postgres": {"connection_string": url}}
        if "dynamodb" in names:
            for key, value in MOTO_ENV.items():
                os.environ.setdefault(key, value)
            moto = start_moto()
            stack.callback(moto.stop)
            configs["dynamodb"] = {"type": "dynamodb", "dynamodb": {
                "table_name": "mirrors-bench", "aws_region": "us-east-1",
                "endpoint_url": moto.endpoint}}
        yield {name: configs[name] for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres,dynamodb")
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput case")
    parser.add_argument("--events", type=int, default=200, help="writes timed through watch()")
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()
    names = [n.strip() for n in args.backends.split(",") if n.strip()]

    print(f"# mirrors_db benchmark: {args.seconds:g} s per throughput case, "
          f"{args.events} watched writes, {args.writers} writers, {os.cpu_count()} CPUs")
    print(f"{'backend':<9} {'case':<26} {'result':>34}")
    with backend_configs(names) as configs:
        for name, config in configs.items():
            with open_mirrors_table(config) as table:
                single = cas_single_writer(table, args.seconds)
                print(f"{name:<9} {'cas 1 writer':<26} {single:>24.0f} updates/s")
                rows = cas_parallel_rows(table, args.writers, args.seconds)
                case = f"cas {args.writers} writers, {args.writers} rows"
                print(f"{name:<9} {case:<26} {rows:>24.0f} updates/s")
                wins, lost = cas_one_row(table, args.writers, args.seconds)
                case = f"cas {args.writers} writers, 1 row"
                print(f"{name:<9} {case:<26} {wins:>10.0f} updates/s, {lost:>5.0%} lost races")
                p50, p99 = watch_delay(table, args.events)
                delay = f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"
                print(f"{name:<9} {'watch delay':<26} {delay:>34}")


if __name__ == "__main__":
    main()
