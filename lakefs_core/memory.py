"""How a long-running process of ours uses the C allocator (glibc's malloc).

The server and the replication service run for weeks with many threads, and move
buffers of a few hundred KiB to a few MiB (range files, listings, request bodies)
through ``malloc``. With glibc's defaults that memory, once freed, is often not given
back to the system:

- each thread may get an arena of its own (up to 8 per core), and free space stays
  spread over all of them;
- the threshold above which a block gets its own mapping (given back when freed)
  rises to the largest block freed so far, so after a while buffers of a few MiB come
  from the arenas, and the holes they leave behind are kept.

Arrow's allocator matters as much. Its default (mimalloc, in a 1 GiB reserved region)
keeps freed pages: in the replication service it held over 100 MiB resident while
Arrow had about 1 MiB allocated, and its resident pages grew by about 1 MiB a minute
in a mirroring soak. The tuned C allocator gives them back at once, but at a price: a
buffer of 128 KiB or more is a mapping of its own, mapped, faulted in and unmapped
each time, and a commit rewriting a million rows spent over 1 s of CPU on that (it
took 2.0 s instead of 1.2 s, with 3.2 s of CPU instead of 2.0 s). Arrow therefore
allocates through jemalloc, which gives freed pages back within a second or two of
their last use: reused while a burst of work lasts, returned when it ends. Arrow
chooses its allocator once, when it loads (``ARROW_DEFAULT_MEMORY_POOL``): a pool set
from Python later covers only what Python asks of it, not Parquet's buffers.
:func:`tune_allocator` therefore runs before anything loads Arrow.

A soak of mirroring showed why all this matters: the replication service's resident
memory grew by about 40 MiB every 5 minutes while the memory it used stayed flat.
:func:`tune_allocator` caps the arenas, pins the mapping threshold and chooses
Arrow's allocator; :func:`release_free_memory` hands free pages back now and then.
Elsewhere than glibc both do nothing. An operator's own ``MALLOC_ARENA_MAX`` /
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` / ``ARROW_DEFAULT_MEMORY_POOL``
environment settings win over ours (``ARROW_DEFAULT_MEMORY_POOL=system`` puts Arrow on
the tuned C allocator; where Arrow is built without jemalloc, it warns when it loads
and uses its own default).

pyarrow, where pandas is installed, imports it the first time it builds an array from
Python objects, only to ask whether they are pandas objects. The services hand it none,
yet a server or replication service paid that import (about 0.9 s of CPU and 57 MiB
resident) at its first read of a range, amid its first requests.
:func:`leave_pandas_unloaded` keeps pandas out of such a process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.abc
import logging
import os
import sys
import threading
import time
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

#: arenas for all threads together (glibc's default: 8 per core)
ARENA_MAX = 2
#: blocks from this size on get a mapping of their own, given back when freed
MMAP_THRESHOLD = 128 * 1024
#: free memory at the top of an arena beyond this is given back at once
TRIM_THRESHOLD = 4 * 1024 * 1024
#: Arrow's allocator (``ARROW_DEFAULT_MEMORY_POOL``)
ARROW_POOL = "jemalloc"

_ENV = {_M_ARENA_MAX: "MALLOC_ARENA_MAX", _M_MMAP_THRESHOLD: "MALLOC_MMAP_THRESHOLD_",
        _M_TRIM_THRESHOLD: "MALLOC_TRIM_THRESHOLD_"}


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - present in glibc only
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def tune_allocator() -> bool:
    """Cap the arenas and pin the mapping and trim thresholds (see the module docs).

    Call it early in a long-running process, before it starts its threads and before
    it imports anything that loads Arrow (``pyarrow``). Returns
    whether the allocator is glibc's (and so was tuned where the environment leaves
    it to us).
    """
    libc = _glibc()
    if libc is None:
        return False
    for param, value in ((_M_ARENA_MAX, ARENA_MAX), (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                         (_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        if _ENV[param] in os.environ:
            continue  # the operator's choice
        if libc.mallopt(param, value) != 1:
            log.warning("mallopt(%d, %d) refused", param, value)
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        # Arrow reads this once, when it loads, for every buffer it allocates; the
        # processes this one starts inherit it
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = ARROW_POOL
        if "pyarrow" in sys.modules:
            import pyarrow as pa

            # covers what Python asks of Arrow, not Arrow's own buffers (Parquet's)
            try:
                pa.set_memory_pool(pa.jemalloc_memory_pool())
            except NotImplementedError:  # an Arrow built without jemalloc
                pa.set_memory_pool(pa.system_memory_pool())
            log.warning("Arrow was loaded before the allocator was tuned: part of its "
                        "memory stays on its own allocator")
    return True


class _PandasLeftOut(importlib.abc.MetaPathFinder):
    """Refuses to import pandas (a finder, not ``None`` in ``sys.modules``: pyarrow's
    compiled import takes a ``None`` found there for the module)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: left out of this service process",
                name=fullname)
        return None


def leave_pandas_unloaded() -> bool:
    """Keep pandas out of this process (see the module docs), unless it is loaded already.

    Call it early in a service process, which never uses pandas: an import of pandas
    then raises ``ModuleNotFoundError``, which pyarrow takes for "not installed".
    Returns whether pandas is kept out.
    """
    if "pandas" in sys.modules:
        return False
    if not any(isinstance(f, _PandasLeftOut) for f in sys.meta_path):
        sys.meta_path.insert(0, _PandasLeftOut())
    return True


def release_free_memory() -> bool:
    """Give the free pages of every arena back to the system (``malloc_trim``).

    Returns whether any memory was given back (False also elsewhere than glibc).
    """
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))


class MemoryReleaser:
    """Calls :func:`release_free_memory` every ``interval`` seconds in a daemon thread
    until :meth:`stop` (it takes a few milliseconds for a few hundred MiB)."""

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-release",
                                        daemon=True)

    def start(self) -> MemoryReleaser:
        if _glibc() is not None and self.interval > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            start = time.perf_counter()
            release_free_memory()
            log.debug("free memory released in %.1f ms", (time.perf_counter() - start) * 1e3)
