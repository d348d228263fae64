"""Tells this region's replication sidecar at once when a branch or tag moves.

This is the fast path of mirroring: the sidecar would find the move on its next
scan anyway (the polling interval stays the fallback), but a notification lets it
sense the new head immediately. Notifications are coalesced per repository and sent
from a background thread; a missing sidecar costs nothing but a refused connection.

Each notification is signed (HMAC-SHA256 over its body, :data:`SIGNATURE_HEADER`)
with a key derived from ``auth.encrypt.secret_key``, which the server and its sidecar
share; the sidecar accepts no unsigned event from its server.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading

import httpx

log = logging.getLogger("lakefs_core.ref_events")

EVENTS_PATH = "/service/replication/v1/internal/ref-events"
#: the header that carries an event body's signature
SIGNATURE_HEADER = "x-lakefs-events-signature"
#: the largest event body a sidecar reads
MAX_EVENTS_BODY = 64 << 10


def events_key(secret_key: str) -> bytes:
    """The key that signs ref events: derived from ``auth.encrypt.secret_key``, so that
    events never share a key with tokens or stored secrets."""
    return hmac.new(secret_key.encode(), b"lakefs-ref-events", hashlib.sha256).digest()


def sign_events(key: bytes, body: bytes) -> str:
    """The signature of an event body (hex HMAC-SHA256)."""
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def events_signed(key: bytes, body: bytes, signature: str | None) -> bool:
    """Whether ``signature`` is the signature of ``body`` under ``key``."""
    return signature is not None and hmac.compare_digest(sign_events(key, body), signature)


class RefEventNotifier:
    """Collects (repository, ref) moves and posts them to the sidecar."""

    def __init__(self, endpoint: str, secret_key: str, *, timeout: float = 2.0) -> None:
        self.url = endpoint.rstrip("/") + EVENTS_PATH
        self._key = events_key(secret_key)
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
            body = json.dumps({"events": events}).encode()
            try:
                self._client.post(self.url, content=body, headers={
                    "content-type": "application/json",
                    SIGNATURE_HEADER: sign_events(self._key, body)})
            except httpx.HTTPError as e:
                log.debug("replication sidecar not notified: %s", e)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=5)
        self._client.close()
