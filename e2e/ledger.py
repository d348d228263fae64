"""What a workload was told, and what of it a region still has: the DR drill's accounting.

A :class:`CommitLedger` holds every commit a region acknowledged (201) to the
workload, with the time the answer arrived. What a region "still has" is the set of
commit ids reachable from its branches. A commit acknowledged and reachable nowhere
is lost.

The status of a mirror states a bound on what a loss of its source may cost
(design I6): per branch, the destination last found the source's head equal to what
it serves at some time, and the lag it shows is never less than the time since. An
:class:`RpoBound` is that statement read just before the source was lost; a commit
acknowledged on a branch before the branch's confirmation time is not at risk, and
losing one is a violation of the bound.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AckedCommit:
    """A commit a region acknowledged to the workload.

    Attributes:
        commit_id: the id the 201 answer carried.
        region: the region that answered.
        branch: the branch committed to.
        acked_at: unix time the answer arrived (the commit was made before).
    """

    commit_id: str
    region: str
    branch: str
    acked_at: float

    def __str__(self) -> str:
        return f"{self.commit_id[:12]} ({self.region} {self.branch})"


class CommitLedger:
    """Every commit acknowledged to the workload, in order; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._commits: list[AckedCommit] = []

    def add(self, commit: AckedCommit) -> None:
        with self._lock:
            self._commits.append(commit)

    def commits(self, region: str | None = None, *, after: float | None = None,
                until: float | None = None) -> list[AckedCommit]:
        """The acknowledged commits, of ``region`` if given, acknowledged in
        ``(after, until]`` if given."""
        with self._lock:
            commits = list(self._commits)
        return [c for c in commits
                if (region is None or c.region == region)
                and (after is None or c.acked_at > after)
                and (until is None or c.acked_at <= until)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._commits)


def unreachable(commits: Iterable[AckedCommit], reachable: Collection[str]) -> list[AckedCommit]:
    """The commits whose id is not in ``reachable`` (those a region lost, or lacks)."""
    return [c for c in commits if c.commit_id not in reachable]


@dataclass(frozen=True)
class RpoBound:
    """What a mirror's status said was at risk, read just before its source was lost.

    Attributes:
        read_at: unix time the status was read.
        lag_seconds: the status's lag (the largest of its branches').
        confirmed: per branch, a time no later than the destination's last confirmation
            of the source's head: the later of ``source_confirmed_at`` (whole seconds,
            rounded down) and ``read_at - lag_seconds`` (the lag is never less than the
            time since the confirmation).
    """

    read_at: float
    lag_seconds: float
    confirmed: Mapping[str, float]

    @classmethod
    def from_status(cls, status: Mapping[str, Any], read_at: float) -> RpoBound:
        """The bound a ``.../mirrors/{id}/status`` answer states, read at ``read_at``."""
        confirmed: dict[str, float] = {}
        for branch in status.get("branches", []):
            points = [read_at - float(branch["lag_seconds"])]
            if branch.get("source_confirmed_at") is not None:
                points.append(float(branch["source_confirmed_at"]))
            confirmed[str(branch["branch"])] = max(points)
        return cls(read_at, float(status.get("lag_seconds") or 0.0), confirmed)

    def confirmed_at(self, branch: str) -> float:
        """When ``branch`` was last confirmed; never for a branch the status lacks."""
        return self.confirmed.get(branch, -math.inf)

    def at_risk(self, commits: Iterable[AckedCommit]) -> list[AckedCommit]:
        """The commits the bound does not cover: acknowledged after their branch's
        confirmation."""
        return [c for c in commits if c.acked_at > self.confirmed_at(c.branch)]

    def outside(self, missing: Iterable[AckedCommit]) -> list[AckedCommit]:
        """The missing commits the bound said were safe: each one breaks it."""
        return [c for c in missing if c.acked_at <= self.confirmed_at(c.branch)]

    def seconds_at_risk(self, lost_at: float) -> float:
        """How far back from ``lost_at`` commits may be missing: to the oldest
        confirmation of any branch."""
        oldest = min(self.confirmed.values(), default=-math.inf)
        return max(0.0, lost_at - oldest)
