"""Compare-and-swap under contention: many threads, and two processes."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mirrors_db import (
    LeaseHeldError,
    MirrorBranch,
    MirrorExistsError,
    MirrorsTable,
    MirrorState,
    VersionConflictError,
)
from tests.mirrors_db.conftest import ORG, spec
from tests.mirrors_db.race_worker import race_on_branch_progress

THREADS = 8


def run_threads(count: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            target(k)
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors


def test_threads_reading_one_version_have_exactly_one_winner(table: MirrorsTable) -> None:
    m = table.update_mirror(table.create_mirror(spec()).with_state(MirrorState.ACTIVE))
    rounds = 8
    barrier = threading.Barrier(THREADS, timeout=120)
    wins: Counter[int] = Counter()
    lock = threading.Lock()

    def worker(k: int) -> None:
        for r in range(rounds):
            barrier.wait()
            current = table.get_mirror(ORG, m.id)
            barrier.wait()  # every thread now holds the same version
            try:
                table.update_mirror(current.with_state(MirrorState.ACTIVE, f"{k}/{r}"))
            except VersionConflictError:
                continue
            with lock:
                wins[r] += 1

    run_threads(THREADS, worker)
    assert [wins[r] for r in range(rounds)] == [1] * rounds
    final = table.get_mirror(ORG, m.id)
    assert final.version == m.version + rounds
    assert final.error.endswith(f"/{rounds - 1}")


def test_retrying_writers_lose_no_update(table: MirrorsTable) -> None:
    m = table.create_mirror(spec())
    table.put_branch_progress(MirrorBranch(ORG, m.id, "main"))
    per_thread = 5

    def worker(_: int) -> None:
        done = 0
        while done < per_thread:
            current = table.get_branch_progress(ORG, m.id, "main")
            try:
                table.put_branch_progress(
                    replace(current, missing_objects=current.missing_objects + 1))
            except VersionConflictError:
                continue
            done += 1

    run_threads(THREADS, worker)
    final = table.get_branch_progress(ORG, m.id, "main")
    assert final.missing_objects == THREADS * per_thread
    assert final.version == 1 + THREADS * per_thread


def test_concurrent_creates_of_one_name_have_one_winner(table: MirrorsTable) -> None:
    barrier = threading.Barrier(THREADS, timeout=120)
    outcomes: list[str] = []

    def worker(k: int) -> None:
        candidate = spec(name="contested", storage_namespace=f"s3://bucket/contested-{k}")
        barrier.wait()
        try:
            table.create_mirror(candidate)
            outcomes.append("created")
        except MirrorExistsError:
            outcomes.append("refused")

    run_threads(THREADS, worker)
    assert sorted(outcomes) == ["created"] + ["refused"] * (THREADS - 1)
    assert [m.name for m in table.list_mirrors(ORG).mirrors] == ["contested"]


def test_concurrent_lease_acquisitions_have_one_winner(table: MirrorsTable) -> None:
    barrier = threading.Barrier(THREADS, timeout=120)
    owners: list[str] = []

    def worker(k: int) -> None:
        barrier.wait()
        try:
            owners.append(table.acquire_lease(ORG, "promoter", f"replica-{k}", ttl=60).owner)
        except LeaseHeldError:
            pass

    run_threads(THREADS, worker)
    assert len(owners) == 1
    lease = table.get_lease(ORG, "promoter")
    assert lease is not None and lease.owner == owners[0]


def test_two_processes_racing_on_one_row_have_one_winner_per_round(
    table: MirrorsTable, mirrors_config: dict[str, Any]
) -> None:
    m = table.create_mirror(spec())
    table.put_branch_progress(MirrorBranch(ORG, m.id, "main"))
    rounds = 10
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=race_on_branch_progress,
                         args=(mirrors_config, ORG, m.id, rounds, name, barrier, results))
             for name in ("left", "right")]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=180) for _ in range(2 * rounds)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    winners = {r: w for r, w, won in outcomes if won}
    assert sorted(winners) == list(range(rounds))
    assert Counter(r for r, _, _ in outcomes) == {r: 2 for r in range(rounds)}
    final = table.get_branch_progress(ORG, m.id, "main")
    assert final.version == 1 + rounds
    assert final.pending_commit == f"{winners[rounds - 1]}-{rounds - 1}"
