"""One limit on failed sign-ins for every door: the REST API's basic auth and
``/auth/login``, the UI's sign-in form and the S3 gateway's signatures.

Failures are counted per client address and access key id together, and per client
address alone. Past :data:`FREE_PAIR_FAILURES` failures of one pair (or
:data:`FREE_ADDRESS_FAILURES` of one address, whatever the keys), that pair (or
address) must wait before its next attempt, twice as long after each further failure
(:data:`FIRST_WAIT_SECONDS` to :data:`MAX_WAIT_SECONDS`); while it waits its secret is
not even checked. So a guesser slows down only itself: the key's owner, signing in
from another address, is never refused, and a right secret clears its pair's
failures. Failures older than :data:`WINDOW_SECONDS` are forgotten.

Counts are kept per server process and bounded: past :data:`MAX_TRACKED` pairs and
addresses, the least recently failing are dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from lakefs_core.errors import AuthenticationError, NotFoundError, TooManySignInsError

FREE_PAIR_FAILURES = 5
FREE_ADDRESS_FAILURES = 50
FIRST_WAIT_SECONDS = 1.0
MAX_WAIT_SECONDS = 300.0
WINDOW_SECONDS = 900.0
MAX_TRACKED = 10_000

T = TypeVar("T")


@dataclass
class _Failures:
    count: int
    last: float


class SignInThrottle:
    """Failed sign-ins of the recent window, by (address, key) and by address."""

    def __init__(self, *, free_pair: int = FREE_PAIR_FAILURES,
                 free_address: int = FREE_ADDRESS_FAILURES, first_wait: float = FIRST_WAIT_SECONDS,
                 max_wait: float = MAX_WAIT_SECONDS, window: float = WINDOW_SECONDS,
                 max_tracked: int = MAX_TRACKED) -> None:
        self._free = {"pair": free_pair, "address": free_address}
        self._first_wait, self._max_wait, self._window = first_wait, max_wait, window
        self._max = max_tracked
        self._failures: OrderedDict[tuple[str, str, str], _Failures] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _keys(address: str, access_key_id: str) -> tuple[tuple[str, str, str], ...]:
        return ("pair", address, access_key_id), ("address", address, "")

    def _wait(self, key: tuple[str, str, str], now: float) -> float:
        failures = self._failures.get(key)
        if failures is None:
            return 0.0
        if now - failures.last > self._window:
            del self._failures[key]
            return 0.0
        beyond = failures.count - self._free[key[0]] - 1
        if beyond < 0:
            return 0.0
        backoff = min(self._max_wait, self._first_wait * 2.0 ** min(beyond, 64))
        return max(0.0, failures.last + backoff - now)

    def retry_after(self, address: str, access_key_id: str) -> float:
        """Seconds until ``access_key_id`` may be tried from ``address`` (0: now)."""
        now = time.monotonic()
        with self._lock:
            return max(self._wait(key, now) for key in self._keys(address, access_key_id))

    def check(self, address: str, access_key_id: str) -> None:
        """Raise :class:`TooManySignInsError` while the pair or the address must wait."""
        wait = self.retry_after(address, access_key_id)
        if wait > 0:
            raise TooManySignInsError(wait)

    def failed(self, address: str, access_key_id: str) -> None:
        """Count a failed sign-in of ``access_key_id`` from ``address``."""
        now = time.monotonic()
        with self._lock:
            for key in self._keys(address, access_key_id):
                failures = self._failures.get(key)
                if failures is None or now - failures.last > self._window:
                    failures = self._failures[key] = _Failures(0, now)
                failures.count += 1
                failures.last = now
                self._failures.move_to_end(key)
            while len(self._failures) > self._max:
                self._failures.popitem(last=False)

    def succeeded(self, address: str, access_key_id: str) -> None:
        """Forget the failures of ``access_key_id`` from ``address``: its owner is back."""
        with self._lock:
            self._failures.pop(("pair", address, access_key_id), None)

    def attempt(self, address: str, access_key_id: str, sign_in: Callable[[], T]) -> T:
        """``sign_in()`` unless the pair or address must wait; counts its failure
        (an authentication error, an unknown key) or clears the pair's on success.

        Raises:
            TooManySignInsError: The client must wait; ``sign_in`` was not called.
        """
        # with no failure counted anywhere there is nothing to wait for or to clear (a
        # failure counted meanwhile is as if it came just after this check)
        if self._failures:
            self.check(address, access_key_id)
        try:
            result = sign_in()
        except (AuthenticationError, NotFoundError):
            self.failed(address, access_key_id)
            raise
        if self._failures:
            self.succeeded(address, access_key_id)
        return result
