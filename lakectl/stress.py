"""A bounded load generator for ``lakectl abuse``: a fixed list of work items, a pool
of workers, a line of figures every second and a latency histogram at the end, in the
shape of lakeFS's ``stress`` package.

Every run ends by itself: when its items are done, or at Ctrl-C (the items not yet
started are dropped, those under way finish).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import click

#: the histogram's buckets, in milliseconds (lakeFS's)
BUCKETS_MS = (1, 2, 5, 7, 10, 15, 25, 50, 75, 100, 250, 350, 500, 750, 1000, 5000)
REPORT_EVERY = 1.0


@dataclass
class Histogram:
    """Latencies: for each bucket, how many took at most that long."""

    counters: dict[int, int] = field(default_factory=lambda: dict.fromkeys(BUCKETS_MS, 0))
    min: int = 0
    max: int = 0
    total: int = 0

    def add(self, ms: int) -> None:
        if self.min == 0 or ms <= self.min:
            self.min = ms
        self.max = max(self.max, ms)
        self.total += 1
        for bucket in BUCKETS_MS:
            if ms <= bucket:
                self.counters[bucket] += 1

    def __str__(self) -> str:
        lines = [f"{b}\t{n}" for b, n in self.counters.items()]
        lines += [f"min\t{self.min}", f"max\t{self.max}", f"total\t{self.total}"]
        return "\n".join(lines) + "\n"


@dataclass
class Collector:
    """Results as they come, and the figures of the interval since the last report."""

    completed: int = 0
    errors: int = 0
    first_error: BaseException | None = None
    histogram: Histogram = field(default_factory=Histogram)
    _current: int = 0
    _since: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, took: float, error: BaseException | None) -> None:
        with self._lock:
            self.completed += 1
            self._current += 1
            if error is None:
                self.histogram.add(int(took * 1000))
            else:
                self.errors += 1
                self.first_error = self.first_error or error

    def stats(self) -> str:
        with self._lock:
            now = time.monotonic()
            rate = self._current / max(now - self._since, 1e-9)
            self._current, self._since = 0, now
            return (f"completed: {self.completed}, errors: {self.errors}, "
                    f"current rate: {rate:.2f} done/second")


def run(name: str, parallelism: int, items: Iterable[str],
        work: Callable[[str], object]) -> Collector:
    """Do ``work`` on every item with ``parallelism`` workers, reporting as lakeFS's
    generator does; a failure of one item counts as an error and the run goes on."""
    collector = Collector()
    source: Iterator[str] = iter(items)
    lock = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            with lock:
                item = next(source, None)
            if item is None:
                return
            start = time.monotonic()
            error: BaseException | None = None
            try:
                work(item)
            except Exception as e:  # noqa: BLE001 - every failure is one error counted
                error = e
            collector.add(time.monotonic() - start, error)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(parallelism, 1))]
    for t in threads:
        t.start()
    try:
        report_at = time.monotonic() + REPORT_EVERY
        while alive := [t for t in threads if t.is_alive()]:
            alive[0].join(max(report_at - time.monotonic(), 0))
            if time.monotonic() >= report_at:
                click.echo(f"{name} - {collector.stats()}")
                report_at += REPORT_EVERY
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join()
    click.echo(f"{collector.stats()}\n")
    click.echo(f"Histogram (ms):\n{collector.histogram}")
    return collector


__all__ = ["BUCKETS_MS", "Collector", "Histogram", "run"]
