"""A stand-in for object-store replication (S3 CRR): copies files, badly on purpose."""

from __future__ import annotations

import heapq
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path


class FaultyReplicator:
    """Copies a source namespace's files to a destination namespace like S3 CRR would,
    but badly: random delay, random order, temporarily dropped and duplicated copies.

    ``run_once()`` does one pass; ``start()`` runs passes in a thread until ``stop()``.
    """

    def __init__(self, src_dir: Path, dst_dir: Path, *, seed: int = 0, drop: float = 0.3,
                 duplicate: float = 0.2, max_delay: float = 0.05,
                 hold: Callable[[str], bool] | None = None) -> None:
        self.src_dir = src_dir
        self.dst_dir = dst_dir
        self.rng = random.Random(seed)
        self.drop = drop
        self.duplicate = duplicate
        self.max_delay = max_delay
        self.hold = hold or (lambda _rel: False)
        self.copied: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pending(self) -> list[str]:
        out = []
        for dirpath, _dirs, files in os.walk(self.src_dir):
            for name in files:
                if name.startswith(".tmp-") or name.startswith("."):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), self.src_dir)
                if not (self.dst_dir / rel).exists():
                    out.append(rel)
        return out

    def _copy(self, rel: str) -> None:
        dst = self.dst_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.parent / f".tmp-crr-{self.rng.random()}"
        shutil.copyfile(self.src_dir / rel, tmp)
        os.replace(tmp, dst)
        self.copied.append(rel)

    def run_once(self) -> int:
        todo = self.pending()
        self.rng.shuffle(todo)
        n = 0
        for rel in todo:
            if self.hold(rel) or self.rng.random() < self.drop:
                continue  # dropped this time; a later pass copies it
            time.sleep(self.rng.random() * self.max_delay)
            self._copy(rel)
            n += 1
            if self.rng.random() < self.duplicate:
                self._copy(rel)
        return n

    def drain(self) -> None:
        """Copy everything not held (no faults)."""
        for rel in self.pending():
            if not self.hold(rel):
                self._copy(rel)

    def start(self, period: float = 0.05) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.run_once()
                self._stop.wait(period)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


class LateCopies:
    """Copies named objects late and out of order, like S3 replication under load.

    Unlike :class:`FaultyReplicator`, which finds its work by walking the source, it
    is told what to copy (``submit``), so a long run costs the same per object at its
    end as at its start. Each key is copied once after a random delay of up to
    ``max_delay`` seconds (so later keys often land first); with probability ``drop``
    an attempt is put off by another delay instead, and with probability
    ``duplicate`` a key is copied a second time later.

    Args:
        copy: copies one key from the source to the destination.
        threads: copies made at once.
    """

    def __init__(self, copy: Callable[[str], None], *, seed: int = 0, max_delay: float = 2.0,
                 drop: float = 0.1, duplicate: float = 0.05, threads: int = 2) -> None:
        self._copy = copy
        self.rng = random.Random(seed)
        self.max_delay = max_delay
        self.drop = drop
        self.duplicate = duplicate
        self.copied = 0
        self.errors = 0
        self._due: list[tuple[float, int, str]] = []  # (when, seq, key): a heap
        self._seq = 0
        self._cond = threading.Condition()
        self._stop = False
        self._threads = [threading.Thread(target=self._run, name=f"late-copies-{i}", daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()

    def _later(self, key: str) -> None:
        """Schedule ``key`` (the lock held)."""
        self._seq += 1
        when = time.monotonic() + self.rng.random() * self.max_delay
        heapq.heappush(self._due, (when, self._seq, key))
        self._cond.notify()

    def submit(self, keys: Iterable[str]) -> None:
        with self._cond:
            for key in keys:
                self._later(key)

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._due)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._due or self._due[0][0] > time.monotonic()):
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._cond.wait(timeout)
                if self._stop:
                    return
                _, _, key = heapq.heappop(self._due)
                if self.rng.random() < self.drop:
                    self._later(key)  # dropped this time: a later attempt copies it
                    continue
                again = self.rng.random() < self.duplicate
            try:
                self._copy(key)
            except Exception:  # noqa: BLE001 - a failed copy is retried like a dropped one
                with self._cond:
                    self.errors += 1
                    self._later(key)
                continue
            with self._cond:
                self.copied += 1
                if again:
                    self._later(key)

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=10)
