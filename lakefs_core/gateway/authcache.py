"""Short-lived reuse of credentials and policies across gateway requests.

Every S3 request names an access key; looking the key up (and decrypting its
secret) and loading its user's effective policies costs two database round trips,
as much as the object operation itself. As lakeFS does (``auth.cache``: enabled,
size, ttl), the gateway reuses both for ``ttl``. A grant takes effect at once (a
refusal is re-checked against fresh policies before it is answered); a revocation
or a deleted key takes effect within ``ttl``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from cachetools import TTLCache

from lakefs_core.auth.model import Credential, Policy
from lakefs_core.auth.service import AuthService
from lakefs_core.config import AuthCacheConfig

_V = TypeVar("_V")


class _TTLCache(Generic[_V]):
    """A bounded, thread-safe map whose entries expire ``ttl`` seconds after they were
    stored, reading through ``load`` on a miss."""

    def __init__(self, size: int, ttl: float, clock: Callable[[], float]) -> None:
        self._items: TTLCache[str, _V] = TTLCache(maxsize=size, ttl=ttl, timer=clock)
        self._lock = threading.Lock()

    def get(self, key: str, load: Callable[[str], _V], *, fresh: bool = False) -> _V:
        if not fresh:
            with self._lock:
                found = self._items.get(key)
            if found is not None:
                return found
        value = load(key)
        with self._lock:
            self._items[key] = value
        return value


class AuthCache:
    """Credentials by access key id and effective policies by user, reused for a while.

    Args:
        auth: Authentication and authorization (auth's public interface).
        config: ``auth.cache`` (disabled means every lookup reads the store).
        clock: Monotonic seconds (tests may drive it).
    """

    def __init__(self, auth: AuthService, config: AuthCacheConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._auth = auth
        self._enabled = config.enabled
        ttl = config.ttl.total_seconds()
        self._credentials: _TTLCache[Credential] = _TTLCache(config.size, ttl, clock)
        self._policies: _TTLCache[list[Policy]] = _TTLCache(config.size, ttl, clock)

    def credential(self, access_key_id: str, *, fresh: bool = False) -> Credential:
        """The access key (with its secret). Raises NotFoundError when unknown."""
        return self._credentials.get(access_key_id, self._auth.get_credentials,
                                     fresh=fresh or not self._enabled)

    def policies(self, username: str, *, fresh: bool = False) -> list[Policy]:
        """The user's effective policies."""
        return self._policies.get(username, self._auth.effective_policies,
                                  fresh=fresh or not self._enabled)
