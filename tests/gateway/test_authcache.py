"""The gateway's reuse of credentials and policies (auth.cache)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lakefs_core.auth import AuthStore
from lakefs_core.auth.builtin import FS_READ_ALL, FS_READ_WRITE_ALL
from lakefs_core.auth.service import AuthService
from lakefs_core.config import AuthCacheConfig
from lakefs_core.errors import NotFoundError
from lakefs_core.gateway.authcache import AuthCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> AuthStore:
    auth = AuthStore(f"sqlite:///{tmp_path / 'auth.db'}", "cache-test-key")
    auth.setup_admin("admin")
    auth.create_user("u")
    return auth


def _names(policies: list) -> list[str]:  # type: ignore[type-arg]
    return [p.name for p in policies]


def test_policies_are_reused_until_the_ttl(store: AuthStore) -> None:
    clock = Clock()
    cache = AuthCache(AuthService(store), AuthCacheConfig(ttl=timedelta(seconds=20)), clock)
    store.attach_policy_to_user("u", FS_READ_ALL)
    assert _names(cache.policies("u")) == [FS_READ_ALL]
    store.detach_policy_from_user("u", FS_READ_ALL)
    store.attach_policy_to_user("u", FS_READ_WRITE_ALL)
    clock.now += 19
    assert _names(cache.policies("u")) == [FS_READ_ALL]
    assert _names(cache.policies("u", fresh=True)) == [FS_READ_WRITE_ALL]
    store.detach_policy_from_user("u", FS_READ_WRITE_ALL)
    clock.now += 21
    assert cache.policies("u") == []


def test_credentials_are_reused_and_unknown_keys_are_not(store: AuthStore) -> None:
    clock = Clock()
    cache = AuthCache(AuthService(store), AuthCacheConfig(ttl=timedelta(seconds=20)), clock)
    with pytest.raises(NotFoundError):
        cache.credential("AKIAJNOTYETKNOWN000Q")
    credential = store.create_credentials("u", "AKIAJNOTYETKNOWN000Q")
    assert cache.credential("AKIAJNOTYETKNOWN000Q").secret == credential.secret
    store.delete_credentials("u", credential.access_key_id)
    assert cache.credential("AKIAJNOTYETKNOWN000Q").user == "u"
    clock.now += 21
    with pytest.raises(NotFoundError):
        cache.credential("AKIAJNOTYETKNOWN000Q")


def test_disabled_cache_always_reads_the_store(store: AuthStore) -> None:
    cache = AuthCache(AuthService(store), AuthCacheConfig(enabled=False), Clock())
    assert cache.policies("u") == []
    store.attach_policy_to_user("u", FS_READ_ALL)
    assert _names(cache.policies("u")) == [FS_READ_ALL]


def test_size_bound(store: AuthStore) -> None:
    clock = Clock()
    cache = AuthCache(AuthService(store), AuthCacheConfig(size=1), clock)
    cache.policies("u")
    cache.policies("admin")
    store.attach_policy_to_user("u", FS_READ_ALL)
    # "u" was evicted by "admin": read again at once
    assert _names(cache.policies("u")) == [FS_READ_ALL]
