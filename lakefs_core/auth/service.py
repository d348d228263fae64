"""Authentication and authorization as a service: the public interface of auth.

Front doors (the REST API, the S3 gateway, the replication service) authenticate a
caller to a :class:`Principal` and authorize what it asks for; none of them reads
the auth tables or evaluates policies itself. :class:`AuthService` answers from this
region's auth tables; another implementation of :class:`Authenticator` may answer
from a remote lakeFS (the replication service's ``auth.api.endpoint``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cachetools import TTLCache

from lakefs_core.auth import rbac
from lakefs_core.auth.backends import open_auth_store
from lakefs_core.auth.base import BaseAuthStore
from lakefs_core.auth.model import Credential, Policy
from lakefs_core.errors import AuthenticationError

if TYPE_CHECKING:
    from lakefs_core.config import DatabaseConfig


@dataclass(frozen=True)
class Principal:
    """An authenticated user and the policies in effect for it."""

    username: str
    policies: Sequence[Policy]

    def allowed(self, requirement: rbac.Requirement) -> bool:
        return rbac.authorize(self.policies, requirement, username=self.username)

    def check(self, requirement: rbac.Requirement) -> None:
        """Raise unless the principal may do what ``requirement`` names.

        Raises:
            PermissionDeniedError: "insufficient permissions".
        """
        rbac.check(self.policies, requirement, username=self.username)


class Authenticator(Protocol):
    """Turns an access key pair into a principal."""

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        """Raises AuthenticationError for unknown keys or a wrong secret."""
        ...


class AuthService:
    """Authentication and authorization over this region's auth tables.

    Args:
        store: the auth tables.
    """

    def __init__(self, store: BaseAuthStore) -> None:
        self.store = store

    @classmethod
    def open(cls, database: DatabaseConfig, secret_key: str) -> AuthService:
        """Open the auth store of the server's ``database`` settings block."""
        return cls(open_auth_store(database, secret_key))


    def close(self) -> None:
        self.store.close()

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        """The principal of an access key pair.

        Raises:
            AuthenticationError: unknown key or wrong secret.
        """
        return self.principal(self.store.authenticate(access_key_id, secret).username)

    def principal(self, username: str) -> Principal:
        """A user's principal with its effective policies. Raises NotFoundError."""
        return Principal(username, self.effective_policies(username))

    def get_credentials(self, access_key_id: str) -> Credential:
        """An access key with its secret, for front doors that verify signatures (SigV4).

        Raises:
            NotFoundError: unknown access key.
        """
        return self.store.get_credentials(access_key_id)

    def effective_policies(self, username: str) -> list[Policy]:
        """The user's policies, attached directly and through its groups."""
        return self.store.effective_policies(username)

    def authorize(self, username: str, requirement: rbac.Requirement) -> None:
        """Raise PermissionDeniedError unless the user's policies allow ``requirement``."""
        self.principal(username).check(requirement)


class CachingAuthenticator:
    """Reuses successful authentications for ``ttl`` seconds (``auth.cache``).

    A cached principal is returned only for the same key and secret (compared as
    digests); failures are never cached, so a revoked key keeps working for ``ttl`` at
    most and a wrong secret is always asked of ``inner``.

    Args:
        inner: what authenticates on a miss.
        size: principals kept at most.
        ttl: seconds one is reused.
        clock: monotonic seconds (tests may drive it).
    """

    def __init__(self, inner: Authenticator, *, size: int, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self._cache: TTLCache[str, tuple[bytes, Principal]] = TTLCache(
            maxsize=size, ttl=ttl, timer=clock)
        self._lock = threading.Lock()

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        digest = hashlib.sha256(secret.encode()).digest()
        with self._lock:
            found = self._cache.get(access_key_id)
        if found is not None and hmac.compare_digest(found[0], digest):
            return found[1]
        principal = self.inner.authenticate(access_key_id, secret)
        with self._lock:
            self._cache[access_key_id] = (digest, principal)
        return principal

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def parse_basic_authorization(header: str) -> tuple[str, str] | None:
    """The (access key id, secret) of an ``Authorization: Basic`` header value.

    Returns:
        None when the header is not basic auth.

    Raises:
        AuthenticationError: a malformed basic auth value.
    """
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise AuthenticationError("malformed basic auth header") from None
    key, sep, secret = decoded.partition(":")
    if not sep:
        raise AuthenticationError("malformed basic auth header")
    return key, secret
