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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cachetools import LRUCache, TTLCache

from lakefs_core.auth import rbac
from lakefs_core.auth.backends import open_auth_store
from lakefs_core.auth.base import BaseAuthStore
from lakefs_core.auth.model import Credential, Policy, User
from lakefs_core.errors import AuthenticationError

if TYPE_CHECKING:
    from lakefs_core.config import DatabaseConfig


@dataclass(frozen=True)
class Principal:
    """An authenticated user and the policies in effect for it."""

    username: str
    policies: Sequence[Policy]
    #: the policies arranged for deciding (kept with them where they are cached)
    index: rbac.PolicyIndex | None = field(default=None, compare=False, repr=False)

    def allowed(self, requirement: rbac.Requirement) -> bool:
        if self.index is not None:
            return self.index.evaluate(requirement) is rbac.Decision.ALLOW
        return rbac.authorize(self.policies, requirement, username=self.username)

    def check(self, requirement: rbac.Requirement) -> None:
        """Raise unless the principal may do what ``requirement`` names.

        Raises:
            PermissionDeniedError: "insufficient permissions".
        """
        if self.index is not None:
            self.index.check(requirement)
            return
        rbac.check(self.policies, requirement, username=self.username)


class Authenticator(Protocol):
    """Turns an access key pair into a principal."""

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        """Raises AuthenticationError for unknown keys or a wrong secret."""
        ...


class AuthService:
    """Authentication and authorization over this region's auth tables.

    What the tables answered (a key's owner, a key with its secret, a user's effective
    policies) is kept per process and reused while the store's change count
    (:meth:`BaseAuthStore.changes`, one indexed read) stays the same: a request reads
    the count once (:meth:`view`), and any write to the tables, in any process, makes
    every process read them again at its next request. So a deleted key or a detached
    policy is refused at once everywhere, and an unchanged request costs one read.

    Args:
        store: the auth tables.
        cache_size: answers of each kind kept at most; 0 keeps none (every request
            reads the tables).
    """

    def __init__(self, store: BaseAuthStore, *, cache_size: int = 1024) -> None:
        self.store = store
        self._cached = cache_size > 0
        size = max(cache_size, 1)
        self._lock = threading.Lock()
        #: by access key id: (changes, digest of the secret, the key's user)
        self._sign_ins: LRUCache[str, tuple[int, bytes, User]] = LRUCache(size)
        self._credentials: LRUCache[str, tuple[int, Credential]] = LRUCache(size)
        self._policies: LRUCache[str, tuple[int, tuple[Policy, ...], rbac.PolicyIndex]] = (
            LRUCache(size))

    @classmethod
    def open(cls, database: DatabaseConfig, secret_key: str) -> AuthService:
        """Open the auth store of the server's ``database`` settings block."""
        return cls(open_auth_store(database, secret_key))

    def close(self) -> None:
        self.store.close()

    def view(self) -> AuthView:
        """The tables as they are now, for one request (reads the change count once)."""
        return AuthView(self, self.store.changes() if self._cached else None)

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        """The principal of an access key pair.

        Raises:
            AuthenticationError: unknown key or wrong secret.
        """
        view = self.view()
        return view.principal(view.sign_in(access_key_id, secret).username)

    def principal(self, username: str) -> Principal:
        """A user's principal with its effective policies. Raises NotFoundError."""
        return self.view().principal(username)

    def get_credentials(self, access_key_id: str) -> Credential:
        """An access key with its secret, for front doors that verify signatures (SigV4).

        Raises:
            NotFoundError: unknown access key.
        """
        return self.view().credential(access_key_id)

    def effective_policies(self, username: str) -> list[Policy]:
        """The user's policies, attached directly and through its groups."""
        return list(self.view().principal(username).policies)

    def authorize(self, username: str, requirement: rbac.Requirement) -> None:
        """Raise PermissionDeniedError unless the user's policies allow ``requirement``."""
        self.principal(username).check(requirement)

    def _reuse(self, cache: LRUCache[str, Any], key: str, changes: int | None) -> Any:
        """The entry cached at ``key`` if it was read at ``changes``; None otherwise."""
        if changes is None:
            return None
        with self._lock:
            found = cache.get(key)
        return found if found is not None and found[0] == changes else None

    def _keep(self, cache: LRUCache[str, Any], key: str, entry: tuple[Any, ...]) -> None:
        if entry[0] is not None:
            with self._lock:
                cache[key] = entry


class AuthView:
    """The auth tables as of one read of their change count: answers cached at that
    count are reused, others are read (and cached at it). Made by :meth:`AuthService.view`
    for one request.

    An answer cached at the count read *before* it was read from the tables is current
    while the count stays: a write made meanwhile raises the count, so the next view
    reads again.
    """

    def __init__(self, service: AuthService, changes: int | None) -> None:
        self._service = service
        self._store = service.store
        self.changes = changes

    def sign_in(self, access_key_id: str, secret: str) -> User:
        """The user of an access key pair (basic auth).

        Raises:
            AuthenticationError: unknown key or wrong secret (never cached).
        """
        service = self._service
        digest = hashlib.sha256(secret.encode()).digest()
        found = service._reuse(service._sign_ins, access_key_id, self.changes)
        if found is not None and hmac.compare_digest(found[1], digest):
            user: User = found[2]
            return user
        user = self._store.authenticate(access_key_id, secret)
        service._keep(service._sign_ins, access_key_id, (self.changes, digest, user))
        return user

    def credential(self, access_key_id: str) -> Credential:
        """An access key with its secret. Raises NotFoundError (never cached)."""
        service = self._service
        found = service._reuse(service._credentials, access_key_id, self.changes)
        if found is not None:
            credential: Credential = found[1]
            return credential
        credential = self._store.get_credentials(access_key_id)
        service._keep(service._credentials, access_key_id, (self.changes, credential))
        return credential

    def principal(self, username: str) -> Principal:
        """A user with its effective policies. Raises NotFoundError."""
        service = self._service
        found = service._reuse(service._policies, username, self.changes)
        if found is not None:
            return Principal(username, found[1], found[2])
        policies = tuple(self._store.effective_policies(username))
        index = rbac.PolicyIndex(policies, username)
        service._keep(service._policies, username, (self.changes, policies, index))
        return Principal(username, policies, index)


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
