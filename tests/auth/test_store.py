"""The auth store's contract, on SQLite, PostgreSQL and DynamoDB (see conftest)."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta

import pytest

from lakefs_core.auth import (
    AuthStore,
    BaseAuthStore,
    Effect,
    Permission,
    Policy,
    Statement,
    builtin,
    rbac,
)
from lakefs_core.errors import (
    AlreadyExistsError,
    AuthenticationError,
    NotFoundError,
    ValidationError,
)
from tests.auth.conftest import SECRET_KEY, OpenStore, count_rows


def _policy(name: str, actions: list[str], resource: str = "*",
            effect: Effect = Effect.ALLOW) -> Policy:
    return Policy(name, [Statement(effect=effect, action=actions, resource=resource)])


def _count(store: BaseAuthStore, table: str) -> int:
    return count_rows(store, table)


# --- users -------------------------------------------------------------------------------
def test_user_lifecycle(store: BaseAuthStore) -> None:
    created = store.create_user("alice", email="alice@example.com")
    got = store.get_user("alice")
    assert got.username == "alice" and got.email == "alice@example.com"
    assert got.creation_date.tzinfo is not None
    assert abs((got.creation_date - created.creation_date).total_seconds()) < 1e-3
    with pytest.raises(AlreadyExistsError):
        store.create_user("alice")
    store.delete_user("alice")
    with pytest.raises(NotFoundError):
        store.get_user("alice")
    with pytest.raises(NotFoundError):
        store.delete_user("alice")


@pytest.mark.parametrize("name", ["", " padded", "tab\there", "x" * 257])
def test_invalid_user_names_are_refused(store: BaseAuthStore, name: str) -> None:
    with pytest.raises(ValidationError):
        store.create_user(name)
    assert store.list_users() == []


def test_list_users_paginates_in_byte_order(store: BaseAuthStore) -> None:
    for name in ["bob", "Bea", "alice", "al_x", "alfred", "zed"]:
        store.create_user(name)
    assert [u.username for u in store.list_users()] == [
        "Bea", "al_x", "alfred", "alice", "bob", "zed"]
    assert [u.username for u in store.list_users(prefix="al")] == ["al_x", "alfred", "alice"]
    # '_' is not a LIKE wildcard here and the prefix match is case-sensitive
    assert [u.username for u in store.list_users(prefix="al_")] == ["al_x"]
    assert [u.username for u in store.list_users(prefix="b")] == ["bob"]
    page1 = store.list_users(amount=2)
    page2 = store.list_users(after=page1[-1].username, amount=2)
    page3 = store.list_users(after=page2[-1].username, amount=2)
    assert [u.username for u in page1 + page2 + page3] == [
        "Bea", "al_x", "alfred", "alice", "bob", "zed"]
    assert store.list_users(after="zed") == []
    # bounds longer than any name are no error
    assert [u.username for u in store.list_users(after="alice" + "z" * 2000)] == ["bob", "zed"]
    assert store.list_users(prefix="a" * 2000) == []
    assert store.list_credentials("zed", after="A" * 2000) == []


# --- credentials ---------------------------------------------------------------------------
def test_generated_credentials(store: BaseAuthStore) -> None:
    store.create_user("alice")
    cred = store.create_credentials("alice")
    assert re.fullmatch(r"AKIAJ[A-Z0-9]{14}Q", cred.access_key_id)
    assert len(cred.secret) == 40
    assert "secret" not in repr(cred) and cred.secret not in repr(cred)
    got = store.get_credentials(cred.access_key_id)
    assert (got.access_key_id, got.secret, got.user) == (cred.access_key_id, cred.secret,
                                                         "alice")


def test_given_credentials_and_listing(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_user("bob")
    a1 = store.create_credentials("alice", "AKIAALICE1", "alice-secret-1")
    a2 = store.create_credentials("alice", "AKIAALICE2", "alice-secret-2")
    store.create_credentials("bob", "AKIABOB", "bob-secret")
    assert store.get_credentials("AKIAALICE2").secret == "alice-secret-2"
    listed = store.list_credentials("alice")
    assert [c.access_key_id for c in listed] == [a1.access_key_id, a2.access_key_id]
    assert not any(hasattr(c, "secret") for c in listed)
    assert [c.access_key_id for c in store.list_credentials("alice", after="AKIAALICE1")] == [
        "AKIAALICE2"]
    with pytest.raises(AlreadyExistsError):
        store.create_credentials("bob", "AKIAALICE1", "another")
    with pytest.raises(NotFoundError):
        store.create_credentials("nobody")
    with pytest.raises(NotFoundError):
        store.list_credentials("nobody")
    with pytest.raises(ValidationError):
        store.create_credentials("alice", "bad key:id", "s")
    with pytest.raises(ValidationError):
        store.create_credentials("alice", "AKIAOK", "has space")


def test_delete_credentials_only_of_their_owner(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_user("bob")
    store.create_credentials("alice", "AKIAALICE", "s1")
    with pytest.raises(NotFoundError):
        store.delete_credentials("bob", "AKIAALICE")
    assert store.get_credentials("AKIAALICE").user == "alice"
    store.delete_credentials("alice", "AKIAALICE")
    with pytest.raises(NotFoundError):
        store.get_credentials("AKIAALICE")
    with pytest.raises(NotFoundError):
        store.delete_credentials("alice", "AKIAALICE")


def test_authenticate(store: BaseAuthStore) -> None:
    store.create_user("alice", email="a@example.com")
    cred = store.create_credentials("alice")
    user = store.authenticate(cred.access_key_id, cred.secret)
    assert (user.username, user.email) == ("alice", "a@example.com")
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        store.authenticate(cred.access_key_id, cred.secret + "x")
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        store.authenticate("AKIAUNKNOWN", cred.secret)


def test_deleting_a_user_removes_keys_memberships_and_attachments(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_user("bob")
    store.create_group("team")
    store.create_policy(_policy("p", ["fs:ReadObject"]))
    for user in ("alice", "bob"):
        store.create_credentials(user)
        store.add_user_to_group(user, "team")
        store.attach_policy_to_user(user, "p")
    store.delete_user("alice")
    assert _count(store, "auth_credentials") == 1
    assert _count(store, "auth_group_members") == 1
    assert _count(store, "auth_user_policies") == 1
    assert [u.username for u in store.list_group_members("team")] == ["bob"]
    # recreating the name starts from nothing
    store.create_user("alice")
    assert store.list_credentials("alice") == []
    assert store.effective_policies("alice") == []


def test_links_made_while_a_user_is_deleted_leave_nothing_behind(
        open_store: OpenStore) -> None:
    """Keys, memberships and attachments written by one process while another deletes
    the user are either refused or deleted with it: none outlives the user."""
    one, other = open_store(), open_store()
    one.create_group("team")
    one.create_policy(_policy("p", ["fs:ReadObject"]))
    refused: list[BaseException] = []
    for _round in range(3):
        one.create_user("u")
        barrier = threading.Barrier(2)

        def link(barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                for _ in range(4):
                    one.add_user_to_group("u", "team")
                    one.attach_policy_to_user("u", "p")
                    one.create_credentials("u")
            except NotFoundError as exc:
                refused.append(exc)

        def delete(barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            other.delete_user("u")

        threads = [threading.Thread(target=link), threading.Thread(target=delete)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for table in ("auth_users", "auth_credentials", "auth_group_members",
                      "auth_user_policies"):
            assert _count(one, table) == 0, table
        assert one.list_group_members("team") == []
    assert all("user not found: u" in str(e) for e in refused)


# --- groups ---------------------------------------------------------------------------
def test_groups_and_membership(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_user("bob")
    store.create_group("readers", description="read only")
    store.create_group("writers")
    with pytest.raises(AlreadyExistsError):
        store.create_group("readers")
    assert store.get_group("readers").description == "read only"
    assert [g.name for g in store.list_groups()] == ["readers", "writers"]
    assert [g.name for g in store.list_groups(prefix="w")] == ["writers"]

    store.add_user_to_group("alice", "readers")
    store.add_user_to_group("alice", "readers")  # already a member: no-op
    store.add_user_to_group("alice", "writers")
    store.add_user_to_group("bob", "readers")
    assert [u.username for u in store.list_group_members("readers")] == ["alice", "bob"]
    assert [g.name for g in store.list_user_groups("alice")] == ["readers", "writers"]
    with pytest.raises(NotFoundError):
        store.add_user_to_group("carol", "readers")
    with pytest.raises(NotFoundError):
        store.add_user_to_group("alice", "nobody")

    store.remove_user_from_group("alice", "writers")
    with pytest.raises(NotFoundError):
        store.remove_user_from_group("alice", "writers")
    assert [g.name for g in store.list_user_groups("alice")] == ["readers"]

    store.delete_group("readers")
    with pytest.raises(NotFoundError):
        store.get_group("readers")
    assert store.list_user_groups("bob") == []
    with pytest.raises(NotFoundError):
        store.list_group_members("readers")
    with pytest.raises(NotFoundError):
        store.delete_group("readers")


# --- policies ---------------------------------------------------------------------------
def test_policy_lifecycle(store: BaseAuthStore) -> None:
    policy = Policy("ReadRepo1", [
        Statement(effect=Effect.ALLOW, action=["fs:Read*", "fs:List*"],
                  resource="arn:lakefs:fs:::repository/repo1/*"),
        Statement(effect=Effect.DENY, action=["fs:ReadObject"],
                  resource='["arn:lakefs:fs:::repository/repo1/object/secret/*"]'),
    ])
    store.create_policy(policy)
    with pytest.raises(AlreadyExistsError):
        store.create_policy(policy)
    got = store.get_policy("ReadRepo1")
    assert got.statements == policy.statements
    assert got.statements[1].resources() == ("arn:lakefs:fs:::repository/repo1/object/secret/*",)

    updated = store.update_policy(_policy("ReadRepo1", ["fs:ReadObject"]))
    assert [st.action for st in updated.statements] == [("fs:ReadObject",)]
    assert updated.creation_date == got.creation_date
    assert store.get_policy("ReadRepo1").statements == updated.statements
    with pytest.raises(NotFoundError):
        store.update_policy(_policy("Missing", ["fs:ReadObject"]))

    store.create_policy(_policy("Another", ["auth:ListUsers"]))
    assert [p.name for p in store.list_policies()] == ["Another", "ReadRepo1"]
    assert [p.name for p in store.list_policies(after="Another")] == ["ReadRepo1"]
    store.delete_policy("ReadRepo1")
    with pytest.raises(NotFoundError):
        store.get_policy("ReadRepo1")
    with pytest.raises(NotFoundError):
        store.delete_policy("ReadRepo1")


def test_effective_policies_combine_direct_and_group_policies(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_group("g1")
    store.create_group("g2")
    for name in ("Direct", "Shared", "ViaG1", "ViaG2", "Unrelated"):
        store.create_policy(_policy(name, ["fs:ReadObject"]))
    store.attach_policy_to_user("alice", "Direct")
    store.attach_policy_to_user("alice", "Shared")
    store.attach_policy_to_user("alice", "Shared")  # no-op
    store.attach_policy_to_group("g1", "ViaG1")
    store.attach_policy_to_group("g1", "Shared")
    store.attach_policy_to_group("g2", "ViaG2")
    store.add_user_to_group("alice", "g1")
    store.add_user_to_group("alice", "g2")

    assert [p.name for p in store.list_user_policies("alice")] == ["Direct", "Shared"]
    assert [p.name for p in store.list_group_policies("g1")] == ["Shared", "ViaG1"]
    assert [p.name for p in store.effective_policies("alice")] == [
        "Direct", "Shared", "ViaG1", "ViaG2"]

    store.detach_policy_from_group("g2", "ViaG2")
    with pytest.raises(NotFoundError):
        store.detach_policy_from_group("g2", "ViaG2")
    store.detach_policy_from_user("alice", "Direct")
    with pytest.raises(NotFoundError):
        store.detach_policy_from_user("alice", "Direct")
    store.delete_policy("ViaG1")  # detaches it everywhere
    assert [p.name for p in store.effective_policies("alice")] == ["Shared"]

    with pytest.raises(NotFoundError):
        store.attach_policy_to_user("alice", "Missing")
    with pytest.raises(NotFoundError):
        store.attach_policy_to_group("missing", "Shared")
    with pytest.raises(NotFoundError):
        store.effective_policies("nobody")


# --- setup ------------------------------------------------------------------------------
def test_setup_admin_creates_builtins_and_an_admin(store: BaseAuthStore) -> None:
    assert not store.is_initialized()
    cred = store.setup_admin("admin", "AKIAIOSFODNN7EXAMPLE",
                             "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    assert store.is_initialized()
    assert (cred.access_key_id, cred.user) == ("AKIAIOSFODNN7EXAMPLE", "admin")
    assert {p.name for p in store.list_policies()} == {
        p.name for p in builtin.builtin_policies()}
    assert {g.name for g in store.list_groups()} == set(builtin.BUILTIN_GROUPS)
    for group, attached in builtin.BUILTIN_GROUPS.items():
        assert {p.name for p in store.list_group_policies(group)} == set(attached)
    assert [g.name for g in store.list_user_groups("admin")] == [builtin.ADMINS]

    user = store.authenticate(cred.access_key_id, cred.secret)
    policies = store.effective_policies(user.username)
    for action, resource in [
        (rbac.MIRROR_REPOSITORY, rbac.repository_arn("src")),
        (rbac.CREATE_REPOSITORY, rbac.repository_arn("any")),
        (rbac.CREATE_USER, rbac.user_arn("someone")),
        (rbac.SET_BRANCH_PROTECTION_RULES, rbac.repository_arn("any")),
    ]:
        assert rbac.authorize(policies, Permission(action, resource), username="admin")


def test_setup_admin_is_idempotent_with_the_same_credentials(store: BaseAuthStore) -> None:
    first = store.setup_admin("admin", "AKIAADMIN", "admin-secret")
    again = store.setup_admin("admin", "AKIAADMIN", "admin-secret")
    assert (again.access_key_id, again.secret) == (first.access_key_id, first.secret)
    assert store.setup_admin("admin", "AKIAADMIN").secret == "admin-secret"
    assert _count(store, "auth_credentials") == 1


@pytest.mark.parametrize("key, secret", [
    (None, None),  # would need a new key
    ("AKIAADMIN", "other-secret"),  # secret differs
    ("AKIAOTHER", "admin-secret"),  # not the admin's key
    ("AKIABOB", "bob-secret"),  # another user's key
])
def test_setup_admin_again_creates_nothing(store: BaseAuthStore, key: str | None,
                                           secret: str | None) -> None:
    store.setup_admin("admin", "AKIAADMIN", "admin-secret")
    store.create_user("bob")
    store.create_credentials("bob", "AKIABOB", "bob-secret")
    with pytest.raises(AlreadyExistsError):
        store.setup_admin("admin", key, secret)
    assert [c.access_key_id for c in store.list_credentials("admin")] == ["AKIAADMIN"]
    assert _count(store, "auth_credentials") == 2


def test_setup_admin_generates_credentials_and_restores_missing_builtins(
        store: BaseAuthStore) -> None:
    cred = store.setup_admin("admin")
    assert re.fullmatch(r"AKIAJ[A-Z0-9]{14}Q", cred.access_key_id)
    store.delete_policy(builtin.FS_READ_ALL)
    store.delete_group(builtin.VIEWERS)
    store.update_policy(_policy(builtin.FS_FULL_ACCESS, ["fs:ReadObject"]))
    store.setup_admin("admin", cred.access_key_id, cred.secret)
    assert {p.name for p in store.list_group_policies(builtin.VIEWERS)} == set(
        builtin.BUILTIN_GROUPS[builtin.VIEWERS])
    # an existing built-in policy is left as the operator changed it
    assert store.get_policy(builtin.FS_FULL_ACCESS).statements[0].action == ("fs:ReadObject",)


def test_untouched_builtins_of_an_earlier_version_are_brought_up_to_date(
        store: BaseAuthStore) -> None:
    store.setup_admin("admin")
    for name, versions in builtin.SUPERSEDED.items():  # as an earlier version wrote them
        store.update_policy(Policy(name, versions[0]))
    store.update_policy(_policy(builtin.FS_READ_ALL, ["fs:ReadObject"]))  # edited
    store.ensure_builtins()
    current = {p.name: p.statements for p in builtin.builtin_policies()}
    assert store.get_policy(builtin.FS_FULL_ACCESS).statements == current[
        builtin.FS_FULL_ACCESS]
    assert rbac.CREATE_PULL_REQUEST in store.get_policy(
        builtin.FS_READ_WRITE_ALL).statements[0].action
    assert store.get_policy(builtin.FS_READ_ALL).statements[0].action == ("fs:ReadObject",)


def test_concurrent_setup_admin_creates_one_admin(open_store: OpenStore) -> None:
    stores = [open_store() for _ in range(4)]
    results: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def run(store: BaseAuthStore) -> None:
        barrier.wait()
        try:
            results.append(store.setup_admin("admin", "AKIAADMIN", "admin-secret").secret)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == ["admin-secret"] * len(stores)
    assert _count(stores[0], "auth_users") == 1
    assert _count(stores[0], "auth_credentials") == 1
    assert [u.username for u in stores[1].list_group_members(builtin.ADMINS)] == ["admin"]


def test_state_survives_reopening(open_store: OpenStore) -> None:
    with open_store() as store:
        cred = store.setup_admin("admin")
    with open_store() as reopened:
        assert reopened.is_initialized()
        assert reopened.get_credentials(cred.access_key_id).secret == cred.secret
        assert reopened.get_user("admin").creation_date <= datetime.now(UTC)


@pytest.mark.parametrize("url", ["mysql://localhost/x", "not a url"])
def test_unsupported_database_is_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        AuthStore(url, SECRET_KEY)


def test_in_memory_sqlite() -> None:
    with AuthStore("sqlite://", SECRET_KEY) as store:
        store.create_user("alice")
        assert [u.username for u in store.list_users()] == ["alice"]


def test_names_the_database_cannot_hold_are_validation_errors(store: BaseAuthStore) -> None:
    """PostgreSQL takes no NUL in text: looking up or attaching such a name is bad input
    (400), never a database failure; and no access key with one authenticates."""
    store.create_user("u1")
    store.create_group("g1")
    for call in (lambda: store.get_user("a\x00b"), lambda: store.get_group("a\x00b"),
                 lambda: store.get_policy("a\x00b"), lambda: store.delete_user("a\x00b"),
                 lambda: store.add_user_to_group("a\x00b", "g1"),
                 lambda: store.attach_policy_to_user("u1", "a\x00b"),
                 lambda: store.get_credentials("AKIA\x00")):
        with pytest.raises((ValidationError, NotFoundError)):
            call()
    with pytest.raises(AuthenticationError):
        store.authenticate("AKIA\x00", "secret")
    assert [u.username for u in store.list_users()] == ["u1"]


def test_revoked_sessions_are_kept_until_they_expire(store: BaseAuthStore) -> None:
    later = datetime.now(UTC) + timedelta(days=7)
    assert not store.session_revoked("s1")
    store.revoke_session("s1", later)
    store.revoke_session("s1", later)  # again: no error
    store.revoke_session("gone", datetime.now(UTC) - timedelta(seconds=1))
    assert store.session_revoked("s1") and store.session_revoked("gone")
    store.revoke_session("s2", later)  # drops the expired rows
    assert not store.session_revoked("gone") and store.session_revoked("s2")
    with pytest.raises(ValidationError):
        store.revoke_session("x" * 65, later)
