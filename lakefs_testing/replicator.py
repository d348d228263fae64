"""A stand-in for object-store replication (S3 CRR): copies files, badly on purpose."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from collections.abc import Callable
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
