"""Benchmark of the refstore on the S3 gateway's hot paths: CPU per call.

Run ``python -m bench.refstore_bench [--n 2000] [--rounds 3] [--url postgresql+psycopg://...]``.
It builds a :class:`SQLRefStore` (a temporary SQLite file unless ``--url`` names a
database, which must be empty) and a :class:`Graveler` over local storage, stages
one object on ``main``, commits another, and times ``--n`` calls of each of:

* ``check_direct_write``: the checks before a PutObject (repository, protection
  rules, branch);
* ``stage_checked``: the staging write of a PutObject and its re-read of the branch;
* ``get_entry_in staged``: a GetObject's lookup of an object staged on a branch;
* ``get_entry_in committed``: a GetObject's lookup of a committed object on a branch
  (staged rows looked up first, then the commit's ranges);
* ``put`` and ``get``: the whole refstore work of a PutObject (``check_direct_write``
  then ``stage_checked``) and of a GetObject (``get_repository`` then ``get_entry_in``).

The cases run in ``--rounds`` interleaved rounds (so that a burst of load on the
machine does not land on one case only); it prints, per case, the median over the
rounds of the CPU microseconds per call of this thread (``time.thread_time``) and
of the wall microseconds per call.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import Entry
from lakefs_core.refstore.sql import SQLRefStore

REPO = "bench"
BRANCH = "main"
STAGED = "tables/events/part=00001/staged.parquet"
COMMITTED = "tables/events/part=00000/committed.parquet"


def _entry(path: str, version: int = 0) -> Entry:
    return Entry(address=f"data/gv{version}/{path}", size=1_000 + version,
                 etag=f"{version:032x}", mtime=1_700_000_000.0 + version,
                 metadata={"origin": "bench"})


def _time(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """CPU and wall microseconds per call of ``fn``."""
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for _ in range(n):
        fn()
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    return cpu / n * 1e6, wall / n * 1e6


def run(url: str, workdir: str, n: int, rounds: int) -> list[tuple[str, float, float]]:
    store = LocalBlockStore(f"{workdir}/blockstore")
    refstore = SQLRefStore(url)
    try:
        g = Graveler(refstore, lambda _sid: store)
        g.create_repository(REPO, "local://bench")
        g.set_entry(REPO, BRANCH, COMMITTED, _entry(COMMITTED))
        g.commit(REPO, BRANCH, "one object", "bench")
        g.set_entry(REPO, BRANCH, STAGED, _entry(STAGED))
        g.set_branch_protection_rules(REPO, ["release-*"])  # a rule that does not match
        repo, branch = g.check_direct_write(REPO, BRANCH)
        written = _entry(STAGED, 1)
        assert g.get_entry_in(repo, BRANCH, STAGED) == _entry(STAGED)
        assert g.get_entry_in(repo, BRANCH, COMMITTED) == _entry(COMMITTED)

        def put() -> None:
            r, b = g.check_direct_write(REPO, BRANCH)
            g.stage_checked(r, b, STAGED, written)

        def get() -> None:
            g.get_entry_in(g.get_repository(REPO), BRANCH, STAGED)

        cases: list[tuple[str, Callable[[], object]]] = [
            ("check_direct_write", lambda: g.check_direct_write(REPO, BRANCH)),
            ("stage_checked", lambda: g.stage_checked(repo, branch, STAGED, written)),
            ("get_entry_in staged", lambda: g.get_entry_in(repo, BRANCH, STAGED)),
            ("get_entry_in committed", lambda: g.get_entry_in(repo, BRANCH, COMMITTED)),
            ("put (check + stage)", put),
            ("get (repository + entry)", get),
        ]
        for _, fn in cases:  # warm-up
            for _ in range(100):
                fn()
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cases}
        for _ in range(rounds):
            for name, fn in cases:
                timings[name].append(_time(fn, n))
        return [(name, statistics.median(c for c, _ in timings[name]),
                 statistics.median(w for _, w in timings[name])) for name, _ in cases]
    finally:
        refstore.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="timed calls per case")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every case")
    parser.add_argument("--url", default="",
                        help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="refstore-bench-")
    try:
        url = args.url or f"sqlite:///{workdir}/refs.db"
        results = run(url, workdir, args.n, args.rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    backend = url.split(":", 1)[0].split("+", 1)[0]
    print(f"# refstore {backend}, {args.n} calls per case and round, median of "
          f"{args.rounds} rounds")
    print(f"{'case':<26} {'cpu us/call':>12} {'wall us/call':>13}")
    for name, cpu, wall in results:
        print(f"{name:<26} {cpu:>12.1f} {wall:>13.1f}")


if __name__ == "__main__":
    main()
