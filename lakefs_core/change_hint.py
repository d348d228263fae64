"""A word of shared memory beside a SQLite file that says "these tables changed".

The auth tables count their writes in a row (:meth:`AuthStore.changes`), and every
request reads that count, to reuse what the tables answered while it stays the same.
On the embedded SQLite file that read is cheap until something else writes the file:
an upload stages a record, and the next read of the count finds its connection's pages
stale and reads them again. That costs more than the rest of authenticating a request.

A :class:`ChangeHint` lets a reader skip the read while the count cannot have moved.
Writers of the tables change the hint after each commit (to 8 random bytes: no read,
no lock, no lost increment between processes). A reader keeps the count it read with
the hint it saw just before, and reads the count again when the hint differs:

* a write whose call has returned has changed the hint, so every request that starts
  after it, in any process sharing the file, reads the new count;
* a writer that dies between its commit and the hint's change leaves the hint as it
  was: a reader trusts an unchanged hint for :data:`TRUST_SECONDS` at most, then reads
  the count anyway. That bound also covers a program writing the tables without the
  hint.

The hint lives in a file beside the database (``<database>-auth-changes``, 8 bytes),
mapped into each process. It holds no data: deleting it costs one read of the count.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import time
from collections.abc import Callable

#: the longest a reader reuses a count while the hint stays the same
TRUST_SECONDS = 1.0
_SIZE = 8


class ChangeHint:
    """The shared word at ``path`` (created if missing).

    Raises:
        OSError: the file cannot be opened or mapped (callers read the count each time).
    """

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            if os.fstat(fd).st_size < _SIZE:
                os.ftruncate(fd, _SIZE)
            self._map: mmap.mmap | None = mmap.mmap(fd, _SIZE)
        finally:
            os.close(fd)
        self.path = path

    def read(self) -> bytes:
        """The hint's value now."""
        shared = self._map
        return b"" if shared is None else shared[:_SIZE]

    def change(self) -> None:
        """Give the hint a new value (after a commit to the tables it covers)."""
        shared = self._map
        if shared is not None:
            shared[:_SIZE] = os.urandom(_SIZE)

    def close(self) -> None:
        shared, self._map = self._map, None
        if shared is not None:
            with contextlib.suppress(BufferError):
                shared.close()


class HintedCount:
    """A count read from the database, reused while a :class:`ChangeHint` stays the same
    (for :data:`TRUST_SECONDS` at most).

    Args:
        hint: the shared word that writers change after each commit.
        read: reads the count from the database.
        clock: monotonic seconds (tests may drive it).
    """

    def __init__(self, hint: ChangeHint, read: Callable[[], int], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.hint = hint
        self._read = read
        self._clock = clock
        #: (the hint seen before the read, the count read, when)
        self._known: tuple[bytes, int, float] | None = None
        self._lock = threading.Lock()

    def get(self) -> int:
        """The count as of now: read again if the hint changed since the last read, or
        if that read is :data:`TRUST_SECONDS` old."""
        seen = self.hint.read()  # before the read: a change after it is seen next time
        now = self._clock()
        known = self._known
        if known is not None and known[0] == seen and now - known[2] < TRUST_SECONDS:
            return known[1]
        count = self._read()
        with self._lock:  # the latest reading wins, whichever thread finishes first
            if self._known is None or self._known[2] <= now:
                self._known = (seen, count, now)
        return count
