"""Auth's public interface: principals, and the reuse of what the auth tables answered
(auth.cache)."""

from __future__ import annotations

from typing import Any

import pytest

from lakefs_core.auth import BaseAuthStore
from lakefs_core.auth.builtin import FS_READ_ALL, FS_READ_WRITE_ALL, VIEWERS
from lakefs_core.auth.service import AuthService, CachingAuthenticator, Principal
from lakefs_core.errors import AuthenticationError, NotFoundError
from tests.auth.conftest import OpenStore


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


# --- AuthService: answers reused while the auth tables are unchanged, on every backend --
def test_every_write_counts_as_a_change(store: BaseAuthStore) -> None:
    seen = [store.changes()]

    def changed() -> bool:
        seen.append(store.changes())
        return seen[-1] > seen[-2]

    store.setup_admin("admin")
    assert changed()
    store.create_user("u")
    assert changed()
    key = store.create_credentials("u")
    assert changed()
    store.attach_policy_to_user("u", FS_READ_ALL)
    assert changed()
    store.add_user_to_group("u", VIEWERS)
    assert changed()
    store.remove_user_from_group("u", VIEWERS)
    assert changed()
    store.detach_policy_from_user("u", FS_READ_ALL)
    assert changed()
    store.delete_credentials("u", key.access_key_id)
    assert changed()
    store.delete_user("u")
    assert changed()
    store.get_policy(FS_READ_ALL)
    store.list_users()
    assert not changed()  # reads are no changes


def test_a_revocation_in_another_process_is_refused_at_the_next_request(
        open_store: OpenStore) -> None:
    here, elsewhere = open_store(), open_store()  # two processes' stores, one database
    elsewhere.setup_admin("admin")
    elsewhere.create_user("u")
    elsewhere.attach_policy_to_user("u", FS_READ_ALL)
    elsewhere.create_group("writers")
    elsewhere.attach_policy_to_group("writers", FS_READ_WRITE_ALL)
    elsewhere.add_user_to_group("u", "writers")
    key = elsewhere.create_credentials("u")
    service = AuthService(here)
    view = service.view()
    assert view.sign_in(key.access_key_id, key.secret).username == "u"
    assert [p.name for p in view.principal("u").policies] == [FS_READ_ALL, FS_READ_WRITE_ALL]
    assert view.credential(key.access_key_id).secret == key.secret

    elsewhere.detach_policy_from_user("u", FS_READ_ALL)
    assert [p.name for p in service.view().principal("u").policies] == [FS_READ_WRITE_ALL]
    elsewhere.remove_user_from_group("u", "writers")
    assert service.view().principal("u").policies == ()
    elsewhere.delete_credentials("u", key.access_key_id)
    with pytest.raises(AuthenticationError):
        service.view().sign_in(key.access_key_id, key.secret)
    with pytest.raises(NotFoundError):
        service.view().credential(key.access_key_id)
    # a view taken before the change answers as the tables were when it was taken
    assert view.sign_in(key.access_key_id, key.secret).username == "u"


def test_unchanged_tables_are_read_once(open_store: OpenStore) -> None:
    store = open_store()
    store.setup_admin("admin")
    store.create_user("u")
    key = store.create_credentials("u")
    service = AuthService(store)
    reads = []
    for method in ("authenticate", "get_credentials", "effective_policies"):
        original = getattr(store, method)

        def counted(*args: object, _original: Any = original, _name: str = method) -> Any:
            reads.append(_name)
            return _original(*args)

        setattr(store, method, counted)
    for _ in range(3):
        view = service.view()
        view.sign_in(key.access_key_id, key.secret)
        view.credential(key.access_key_id)
        view.principal("u")
    assert reads == ["authenticate", "get_credentials", "effective_policies"]
    with pytest.raises(AuthenticationError):  # a wrong secret is always asked of the store
        service.view().sign_in(key.access_key_id, "wrong")
    assert reads[-1] == "authenticate"
    uncached = AuthService(store, cache_size=0)
    uncached.view().principal("u")
    uncached.view().principal("u")
    assert reads[-2:] == ["effective_policies"] * 2
