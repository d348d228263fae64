"""Auth's public interface: principals, and the reuse of authentications (auth.cache)."""

from __future__ import annotations

import pytest

from lakefs_core.auth.service import CachingAuthenticator, Principal
from lakefs_core.errors import AuthenticationError


class Keys:
    """An authenticator over a dict of keys, counting what it is asked."""

    def __init__(self) -> None:
        self.secrets = {"AKIA1": "s1"}
        self.asked = 0

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        self.asked += 1
        if self.secrets.get(access_key_id) != secret:
            raise AuthenticationError("invalid credentials")
        return Principal("alice", [])


def test_successes_are_reused_for_the_ttl_only() -> None:
    now = [100.0]
    keys = Keys()
    cached = CachingAuthenticator(keys, size=10, ttl=20, clock=lambda: now[0])
    assert cached.authenticate("AKIA1", "s1").username == "alice"
    assert cached.authenticate("AKIA1", "s1").username == "alice"
    assert keys.asked == 1
    now[0] += 21
    assert cached.authenticate("AKIA1", "s1").username == "alice"
    assert keys.asked == 2


def test_a_wrong_secret_is_never_answered_from_the_cache() -> None:
    keys = Keys()
    cached = CachingAuthenticator(keys, size=10, ttl=20, clock=lambda: 0.0)
    cached.authenticate("AKIA1", "s1")
    for _ in range(2):
        with pytest.raises(AuthenticationError):
            cached.authenticate("AKIA1", "wrong")
    assert keys.asked == 3  # each failure asked again
    keys.secrets.clear()  # revoked: the cached success lasts until the ttl
    assert cached.authenticate("AKIA1", "s1").username == "alice"
