"""Tells this region's replication sidecar at once when a branch or tag moves.

This is the fast path of mirroring: the sidecar would find the move on its next
scan anyway (the polling interval stays the fallback), but a notification lets it
sense the new head immediately. Notifications are coalesced per repository and sent
from a background thread; a missing sidecar costs nothing but a refused connection.
"""

from __future__ import annotations

import logging
import threading

import httpx

log = logging.getLogger("lakefs_core.ref_events")

EVENTS_PATH = "/service/replication/v1/internal/ref-events"


class RefEventNotifier:
    """Collects (repository, ref) moves and posts them to the sidecar."""

    def __init__(self, endpoint: str, *, timeout: float = 2.0) -> None:
        self.url = endpoint.rstrip("/") + EVENTS_PATH
        self._pending: dict[str, set[str]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._client = httpx.Client(timeout=timeout)
        self._thread = threading.Thread(target=self._run, name="ref-events", daemon=True)
        self._thread.start()

    def __call__(self, repository: str, ref: str) -> None:
        with self._cond:
            self._pending.setdefault(repository, set()).add(ref)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                batch, self._pending = self._pending, {}
            events = [{"repository": repo, "refs": sorted(refs)} for repo, refs in batch.items()]
            try:
                self._client.post(self.url, json={"events": events})
            except httpx.HTTPError as e:
                log.debug("replication sidecar not notified: %s", e)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=5)
        self._client.close()
