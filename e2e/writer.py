"""A workload that keeps committing while regions fail and hand over: the DR drill's.

A :class:`CommitWriter` thread commits a small change to one of a few branches every
100-300 ms (or in a burst, one after the other, when asked), in whichever region is its
target (the drill redirects it, as an operator points the clients at the new primary),
and records every commit a region acknowledged in a :class:`~e2e.ledger.CommitLedger`.
Refused writes (a frozen or read-only repository, a region that is gone) are counted
and tried again later.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from e2e.api import ApiError, RegionClient
from e2e.ledger import AckedCommit, CommitLedger


@dataclass(frozen=True)
class Refusal:
    """A write a region did not accept: ``status`` 0 when it did not answer."""

    region: str
    at: float
    status: int
    message: str


class CommitWriter:
    """Commits to ``repo`` from a background thread, recording what was acknowledged.

    Args:
        clients: per region, a client the writer uses alone.
        repo: the repository (the same name in every region).
        branches: the branches written to (each exists in every region).
        region: the first target.
        seed: where contents, branches and pauses come from.
        pause: the range of seconds between two commits.
    """

    def __init__(self, clients: Mapping[str, RegionClient], repo: str,
                 branches: Sequence[str], region: str, *, seed: int,
                 pause: tuple[float, float] = (0.1, 0.3)) -> None:
        self.clients = dict(clients)
        self.repo = repo
        self.branches = tuple(branches)
        self.pause = pause
        self.ledger = CommitLedger()
        self.refusals: list[Refusal] = []
        #: set while a commit request is on its way (a kill then lands mid-write)
        self.committing = threading.Event()
        #: what stopped the thread other than :meth:`stop` (a harness failure)
        self.failure: BaseException | None = None
        self._rng = random.Random(seed)
        self._region = region
        self._written = 0
        self._burst = 0
        self._stop = threading.Event()
        self._acked = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="drill-writer", daemon=True)

    # ------------------------------------------------------------------ control
    @property
    def region(self) -> str:
        return self._region

    def redirect(self, region: str) -> None:
        """Write to ``region`` from the next commit on."""
        self._region = region

    def burst(self, commits: int) -> None:
        """Make the next ``commits`` commits one after the other, without pausing."""
        self._burst = commits

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def refused(self, region: str | None = None, *, after: float = 0.0) -> list[Refusal]:
        return [r for r in list(self.refusals)
                if (region is None or r.region == region) and r.at > after]

    def wait_for_ack(self, region: str, *, after: float, timeout: float) -> AckedCommit:
        """The first commit ``region`` acknowledged after ``after``, waiting for one.

        Raises:
            TimeoutError: none within ``timeout`` seconds (or the writer stopped).
        """
        deadline = time.monotonic() + timeout
        with self._acked:
            while True:
                acked = self.ledger.commits(region, after=after)
                if acked:
                    return acked[0]
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    raise TimeoutError(f"{region} acknowledged no commit within "
                                       f"{timeout:.0f}s; last refusals: "
                                       f"{[r.message[:120] for r in self.refused(region)[-3:]]}")
                self._acked.wait(min(left, 0.5))

    # ------------------------------------------------------------------- thread
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                region = self._region
                try:
                    self._write(region)
                except ApiError as e:
                    self.refusals.append(Refusal(region, time.time(), e.status, e.message))
                if self._burst > 0:
                    self._burst -= 1
                else:
                    self._stop.wait(self._rng.uniform(*self.pause))
        except BaseException as e:  # noqa: BLE001 - reported by the drill as its failure
            self.failure = e

    def _write(self, region: str) -> None:
        client = self.clients[region]
        branch = self._rng.choice(self.branches)
        self._written += 1
        body = f"{region} {branch} #{self._written}\n".encode() + self._rng.randbytes(
            self._rng.choice((0, 64, 1000)))
        client.upload(self.repo, branch, f"drill/{branch}/part-{self._rng.randrange(16):02d}",
                      body)
        self.committing.set()
        try:
            commit_id = client.commit(self.repo, branch, f"drill write {self._written}")
        finally:
            self.committing.clear()
        with self._acked:
            self.ledger.add(AckedCommit(commit_id, region, branch, time.time()))
            self._acked.notify_all()
