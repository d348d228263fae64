"""A limit on failed sign-ins, per access key id and per client address.

After :data:`KEY_FAILURES` failed sign-ins with one access key id, or
:data:`ADDRESS_FAILURES` from one client address, within :data:`WINDOW_SECONDS`, the
login form refuses every attempt of that key or address (a right secret too) until
the oldest failure leaves the window. Memory is bounded: at most :data:`MAX_TRACKED`
keys and addresses are tracked, the least recently failing dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque

WINDOW_SECONDS = 300.0
KEY_FAILURES = 5
ADDRESS_FAILURES = 50
MAX_TRACKED = 10_000


class LoginThrottle:
    """Failed sign-ins in the recent window, by access key id and by client address."""

    def __init__(self, *, window: float = WINDOW_SECONDS, key_failures: int = KEY_FAILURES,
                 address_failures: int = ADDRESS_FAILURES,
                 max_tracked: int = MAX_TRACKED) -> None:
        self.window = window
        self._limits = {"key": key_failures, "address": address_failures}
        self._max = max_tracked
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, kind: str, value: str, now: float) -> deque[float] | None:
        times = self._failures.get((kind, value))
        if times is None:
            return None
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[(kind, value)]
            return None
        return times

    def retry_after(self, access_key_id: str, address: str) -> float:
        """Seconds until ``access_key_id`` from ``address`` may try again (0: now)."""
        now = time.monotonic()
        wait = 0.0
        with self._lock:
            for kind, value in (("key", access_key_id), ("address", address)):
                times = self._recent(kind, value, now)
                if times is not None and len(times) >= self._limits[kind]:
                    wait = max(wait, times[-self._limits[kind]] + self.window - now)
        return wait

    def failed(self, access_key_id: str, address: str) -> None:
        """Count a failed sign-in."""
        now = time.monotonic()
        with self._lock:
            for kind, value in (("key", access_key_id), ("address", address)):
                times = self._recent(kind, value, now)
                if times is None:
                    times = self._failures[(kind, value)] = deque(maxlen=self._limits[kind])
                times.append(now)
                self._failures.move_to_end((kind, value))
            while len(self._failures) > self._max:
                self._failures.popitem(last=False)
