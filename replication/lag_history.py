"""The recent lag of mirror branches: bounded, in memory, sampled from the mirrors table."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque

from mirrors_db.models import MirrorBranch


def branch_lag(progress: MirrorBranch, now: float) -> float:
    """The honest lag of a mirror branch at ``now``: seconds since the destination last
    read the source's head and found the mirror serving it (``source_confirmed_at``).

    Every commit made on the source before that instant is on the mirror, so this
    bounds what the mirror may be missing; it keeps growing while the source cannot be
    read. A row never confirmed (written by an earlier version) counts from when its
    unpromoted head, or its current head, was first seen.
    """
    behind = 0.0
    if (progress.source_head is not None and progress.source_head_seen_at is not None
            and progress.source_head != progress.promoted_commit):
        behind = now - progress.source_head_seen_at.timestamp()
    since = progress.source_confirmed_at or progress.source_head_seen_at
    if since is None:
        return max(0.0, behind)
    return max(0.0, behind, now - since.timestamp())


class LagHistory:
    """Per mirror and branch, the lag samples of the last ``window`` seconds.

    At most ``max_series`` branches are kept, each at most ``window / interval`` (plus
    one) samples; the branch sampled least recently is forgotten first.
    """

    def __init__(self, *, interval: float, window: float, max_series: int) -> None:
        self.interval = interval
        self.window = window
        self._per_series = max(1, math.ceil(window / interval) + 1) if interval > 0 else 1
        self._max_series = max_series
        self._series: OrderedDict[tuple[str, str], deque[tuple[float, float]]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, mirror_id: str, branch: str, at: float, lag: float) -> None:
        key = (mirror_id, branch)
        with self._lock:
            samples = self._series.get(key)
            if samples is None:
                samples = self._series[key] = deque(maxlen=self._per_series)
            samples.append((at, lag))
            self._series.move_to_end(key)
            while len(self._series) > self._max_series:
                self._series.popitem(last=False)

    def samples(self, mirror_id: str, now: float | None = None) -> dict[str, list[tuple[float,
                                                                                        float]]]:
        """Each branch's samples of the last ``window`` seconds, oldest first."""
        since = (time.time() if now is None else now) - self.window
        with self._lock:
            return {branch: [s for s in samples if s[0] >= since]
                    for (mirror, branch), samples in self._series.items()
                    if mirror == mirror_id}

    def forget(self, keep: set[str]) -> None:
        """Drop the series of mirrors not in ``keep`` (no longer sampled)."""
        with self._lock:
            for key in [k for k in self._series if k[0] not in keep]:
                del self._series[key]

    def __len__(self) -> int:
        return len(self._series)
