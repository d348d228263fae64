"""Auth API against a live server: users, credentials, groups, policies, attachments
and login tokens, through the generated ``lakefs_sdk`` client and httpx."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import jwt
import lakefs_sdk
import pytest
from lakefs.client import Client
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from lakefs_core.api.security import (
    LOGIN_DURATION_SECONDS,
    _token_key,
    issue_token,
    verify_token,
)
from lakefs_core.auth.throttle import FREE_PAIR_FAILURES
from lakefs_core.errors import AuthenticationError
from lakefs_testing.live_server import LiveServer, live_server

_names = itertools.count()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("auth-server"))) as s:
        yield s


@pytest.fixture
def auth_api(srv: LiveServer) -> lakefs_sdk.AuthApi:
    client = Client(host=srv.endpoint, username=srv.access_key_id,
                    password=srv.secret_access_key)
    return client.sdk_client.auth_api


@pytest.fixture
def http(srv: LiveServer) -> Iterator[httpx.Client]:
    with srv.client() as c:
        yield c


def name(kind: str) -> str:
    return f"{kind}-{next(_names)}"


def status_of(call: object) -> int:
    assert callable(call)
    with pytest.raises(ApiException) as info:
        call()
    return int(info.value.status)


def test_users_create_get_list_delete(auth_api: lakefs_sdk.AuthApi) -> None:
    prefix = name("people")
    ids = [f"{prefix}-{i}" for i in range(5)]
    for user_id in ids:
        created = auth_api.create_user(lakefs_sdk.UserCreation(id=user_id))
        assert created.id == user_id
        assert created.creation_date > 0
    assert auth_api.get_user(ids[0]).id == ids[0]
    assert status_of(lambda: auth_api.create_user(lakefs_sdk.UserCreation(id=ids[0]))) == 409

    first = auth_api.list_users(prefix=prefix, amount=2)
    assert [u.id for u in first.results] == ids[:2]
    assert first.pagination.has_more
    assert first.pagination.next_offset == ids[1]
    rest = auth_api.list_users(prefix=prefix, after=first.pagination.next_offset, amount=10)
    assert [u.id for u in rest.results] == ids[2:]
    assert not rest.pagination.has_more

    auth_api.delete_user(ids[0])
    assert status_of(lambda: auth_api.get_user(ids[0])) == 404
    assert status_of(lambda: auth_api.delete_user(ids[0])) == 404
    assert [u.id for u in auth_api.list_users(prefix=prefix).results] == ids[1:]


def test_invalid_input_is_400(http: httpx.Client) -> None:
    assert http.post("/auth/users", json={"id": ""}).status_code == 400
    assert http.post("/auth/users", json={}).status_code == 400
    assert http.post("/auth/users", content=b"not json",
                     headers={"content-type": "application/json"}).status_code == 400
    assert http.get("/auth/users", params={"amount": 1001}).status_code == 400
    statement = {"effect": "allow", "action": ["fs:ReadObject"], "resource": "*"}
    bad_effect = {"id": name("pol"), "statement": [{**statement, "effect": "maybe"}]}
    assert http.post("/auth/policies", json=bad_effect).status_code == 400
    bad_action = {"id": name("pol"), "statement": [{**statement, "action": ["nope"]}]}
    assert http.post("/auth/policies", json=bad_action).status_code == 400
    no_statements = {"id": name("pol"), "statement": []}
    assert http.post("/auth/policies", json=no_statements).status_code == 400
    conditional = {"id": name("pol"), "statement": [
        {**statement, "condition": {"IpAddress": {"SourceIp": ["10.0.0.0/8"]}}}]}
    resp = http.post("/auth/policies", json=conditional)
    assert resp.status_code == 400
    assert "condition" in resp.json()["message"]


def test_credentials_lifecycle(srv: LiveServer, auth_api: lakefs_sdk.AuthApi,
                               http: httpx.Client) -> None:
    user = name("keys")
    auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    generated = auth_api.create_credentials(user)
    assert generated.access_key_id.startswith("AKIA")
    assert len(generated.secret_access_key) >= 20
    # a chosen secret travels in the body: in a URL it would end up in access logs
    in_query = http.post(f"/auth/users/{user}/credentials",
                         params={"access_key_id": "AKIAIOSFODNN7GIVEN01",
                                 "secret_access_key": "a-chosen-secret-of-enough-length"})
    assert in_query.status_code == 400
    assert "query string" in in_query.json()["message"]
    given = http.post(f"/auth/users/{user}/credentials",
                      json={"access_key_id": "AKIAIOSFODNN7GIVEN01",
                            "secret_access_key": "a-chosen-secret-of-enough-length"})
    assert given.status_code == 201
    assert given.json()["access_key_id"] == "AKIAIOSFODNN7GIVEN01"
    assert given.json()["secret_access_key"] == "a-chosen-secret-of-enough-length"

    listed = auth_api.list_user_credentials(user)
    assert sorted(c.access_key_id for c in listed.results) == sorted(
        [generated.access_key_id, "AKIAIOSFODNN7GIVEN01"])
    got = auth_api.get_credentials(user, generated.access_key_id)
    assert got.access_key_id == generated.access_key_id
    assert "secret" not in http.get(
        f"/auth/users/{user}/credentials/{generated.access_key_id}").text
    assert status_of(lambda: auth_api.get_credentials("admin", generated.access_key_id)) == 404

    # the new key authenticates (the user has no policies: 403, not 401)
    with httpx.Client(base_url=srv.api,
                      auth=(generated.access_key_id, generated.secret_access_key)) as c:
        assert c.get("/repositories").status_code == 403
        auth_api.delete_credentials(user, generated.access_key_id)
        assert c.get("/repositories").status_code == 401
    assert status_of(lambda: auth_api.delete_credentials(user, generated.access_key_id)) == 404
    assert [c.access_key_id for c in auth_api.list_user_credentials(user).results] == [
        "AKIAIOSFODNN7GIVEN01"]


def test_groups_and_membership(auth_api: lakefs_sdk.AuthApi) -> None:
    group, alice, bob = name("group"), name("alice"), name("bob")
    for user in (alice, bob):
        auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    created = auth_api.create_group(lakefs_sdk.GroupCreation(id=group, description="team"))
    assert (created.id, created.description) == (group, "team")
    assert status_of(lambda: auth_api.create_group(lakefs_sdk.GroupCreation(id=group))) == 409
    auth_api.add_group_membership(group, alice)
    auth_api.add_group_membership(group, bob)
    auth_api.add_group_membership(group, bob)  # already a member: no-op
    assert [u.id for u in auth_api.list_group_members(group).results] == sorted([alice, bob])
    assert group in [g.id for g in auth_api.list_user_groups(alice).results]
    assert group in [g.id for g in auth_api.list_groups(prefix=group).results]
    auth_api.delete_group_membership(group, alice)
    assert status_of(lambda: auth_api.delete_group_membership(group, alice)) == 404
    assert [u.id for u in auth_api.list_group_members(group).results] == [bob]
    assert status_of(lambda: auth_api.add_group_membership(group, "nobody-here")) == 404
    auth_api.delete_group(group)
    assert status_of(lambda: auth_api.get_group(group)) == 404
    assert auth_api.list_user_groups(bob).results == []


def test_policies_crud_and_attachments(srv: LiveServer, auth_api: lakefs_sdk.AuthApi) -> None:
    policy_id, user, group = name("policy"), name("carol"), name("readers")
    statement = lakefs_sdk.Statement(effect="allow", action=["fs:ListRepositories"],
                                     resource="*")
    created = auth_api.create_policy(lakefs_sdk.Policy(id=policy_id, statement=[statement]))
    assert created.id == policy_id
    assert created.creation_date
    assert status_of(lambda: auth_api.create_policy(
        lakefs_sdk.Policy(id=policy_id, statement=[statement]))) == 409
    assert auth_api.get_policy(policy_id).statement[0].action == ["fs:ListRepositories"]
    assert policy_id in [p.id for p in auth_api.list_policies(prefix=policy_id).results]
    builtin = [p.id for p in auth_api.list_policies().results]
    assert {"FSFullAccess", "FSReadAll", "FSReadWriteAll", "AuthFullAccess"} <= set(builtin)

    auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    key = auth_api.create_credentials(user)
    with httpx.Client(base_url=srv.api, auth=(key.access_key_id, key.secret_access_key)) as c:
        assert c.get("/repositories").status_code == 403
        auth_api.attach_policy_to_user(user, policy_id)
        assert [p.id for p in auth_api.list_user_policies(user).results] == [policy_id]
        assert c.get("/repositories").status_code == 200
        auth_api.detach_policy_from_user(user, policy_id)
        assert c.get("/repositories").status_code == 403
        assert status_of(lambda: auth_api.detach_policy_from_user(user, policy_id)) == 404

        auth_api.create_group(lakefs_sdk.GroupCreation(id=group))
        auth_api.attach_policy_to_group(group, policy_id)
        auth_api.add_group_membership(group, user)
        assert [p.id for p in auth_api.list_group_policies(group).results] == [policy_id]
        assert auth_api.list_user_policies(user).results == []
        effective = auth_api.list_user_policies(user, effective=True)
        assert [p.id for p in effective.results] == [policy_id]
        assert c.get("/repositories").status_code == 200

        deny = lakefs_sdk.Statement(effect="deny", action=["fs:*"], resource="*")
        updated = auth_api.update_policy(policy_id, lakefs_sdk.Policy(
            id=policy_id, statement=[statement, deny]))
        assert [s.effect for s in updated.statement] == ["allow", "deny"]
        assert c.get("/repositories").status_code == 403
        auth_api.detach_policy_from_group(group, policy_id)
        assert auth_api.list_group_policies(group).results == []
    assert status_of(lambda: auth_api.update_policy("other-id", lakefs_sdk.Policy(
        id=policy_id, statement=[statement]))) == 400
    auth_api.delete_policy(policy_id)
    assert status_of(lambda: auth_api.get_policy(policy_id)) == 404


def test_users_manage_only_their_own_credentials(srv: LiveServer,
                                                 auth_api: lakefs_sdk.AuthApi) -> None:
    dave, erin = name("dave"), name("erin")
    for user in (dave, erin):
        auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    auth_api.add_group_membership("Viewers", dave)
    key = auth_api.create_credentials(dave)
    own = Client(host=srv.endpoint, username=key.access_key_id,
                 password=key.secret_access_key).sdk_client.auth_api
    second = own.create_credentials(dave)
    assert [c.access_key_id for c in own.list_user_credentials(dave).results] == sorted(
        [key.access_key_id, second.access_key_id])
    assert status_of(lambda: own.create_credentials(erin)) == 403
    assert status_of(lambda: own.list_user_credentials(erin)) == 403
    assert status_of(lambda: own.create_user(lakefs_sdk.UserCreation(id=name("x")))) == 403
    assert status_of(lambda: own.delete_user(erin)) == 403
    assert status_of(lambda: own.attach_policy_to_user(dave, "FSFullAccess")) == 403
    assert auth_api.list_user_credentials(erin).results == []
    assert auth_api.list_user_policies(dave).results == []


def test_login_token_is_accepted_as_bearer(srv: LiveServer, auth_api: lakefs_sdk.AuthApi,
                                           request: pytest.FixtureRequest) -> None:
    anon = httpx.Client(base_url=srv.api)
    request.addfinalizer(anon.close)
    resp = anon.post("/auth/login", json={"access_key_id": srv.access_key_id,
                                          "secret_access_key": srv.secret_access_key})
    assert resp.status_code == 200
    token = resp.json()["token"]
    assert resp.json()["token_expiration"] > 0
    me = anon.get("/user", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200
    assert me.json()["user"]["id"] == "admin"

    # the SDK's own token support
    with_token = Client(host=srv.endpoint, access_token=token).sdk_client
    assert with_token.auth_api.get_current_user().user.id == "admin"

    bad = anon.post("/auth/login", json={"access_key_id": srv.access_key_id,
                                         "secret_access_key": "wrong"})
    assert bad.status_code == 401
    head, payload, signature = token.split(".")
    forged = f"{head}.{payload}.{signature[:-2]}AA"
    for header in (f"Bearer {forged}", "Bearer not-a-token", "Bearer a.b.c", "Token x"):
        assert anon.get("/user", headers={"Authorization": header}).status_code == 401

    user = name("frank")
    auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    key = auth_api.create_credentials(user)
    user_token = anon.post("/auth/login", json={
        "access_key_id": key.access_key_id,
        "secret_access_key": key.secret_access_key}).json()["token"]
    bearer = {"Authorization": f"Bearer {user_token}"}
    assert anon.get("/user", headers=bearer).json()["user"]["id"] == user
    assert anon.get("/auth/users", headers=bearer).status_code == 403
    auth_api.delete_user(user)
    assert anon.get("/user", headers=bearer).status_code == 401
    anon.close()


def test_token_expiry_and_key_separation(srv: LiveServer) -> None:
    token, expires = issue_token(srv.services, "admin", now=1000.0)
    assert verify_token(srv.services, token, now=expires - 1) == "admin"
    with pytest.raises(AuthenticationError, match="expired"):
        verify_token(srv.services, token, now=expires)
    # a server with another auth.encrypt.secret_key does not accept the token
    other = srv.services.config.model_copy(deep=True)
    other.auth.encrypt.secret_key = SecretStr("a-different-secret-key")
    services = replace(srv.services, config=other)
    with pytest.raises(AuthenticationError, match="invalid token"):
        verify_token(services, token, now=expires - 1)


def test_tokens_die_with_their_key_and_user(srv: LiveServer, auth_api: lakefs_sdk.AuthApi,
                                            request: pytest.FixtureRequest) -> None:
    anon = httpx.Client(base_url=f"{srv.endpoint}/api/v1")
    request.addfinalizer(anon.close)

    def login(key: lakefs_sdk.Credentials) -> dict[str, str]:
        resp = anon.post("/auth/login", json={"access_key_id": key.access_key_id,
                                              "secret_access_key": key.secret_access_key})
        assert resp.status_code == 200, resp.text
        return {"Authorization": f"Bearer {resp.json()['token']}"}

    user = name("gina")
    auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    first, second = auth_api.create_credentials(user), auth_api.create_credentials(user)
    by_first, by_second = login(first), login(second)
    auth_api.delete_credentials(user, first.access_key_id)
    assert anon.get("/user", headers=by_first).status_code == 401  # its key is gone
    assert anon.get("/user", headers=by_second).status_code == 200
    # the same name created again is another user: the old user's tokens are not its
    auth_api.delete_user(user)
    auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    again = auth_api.create_credentials(user)
    assert anon.get("/user", headers=by_second).status_code == 401
    assert anon.get("/user", headers=login(again)).status_code == 200


def test_a_token_longer_than_the_login_duration_is_refused(srv: LiveServer) -> None:
    now = int(time.time())
    user = srv.services.auth.get_user("admin")
    key = srv.access_key_id
    claims = {"sub": "admin", "iat": now, "key": key,
              "ucd": int(user.creation_date.timestamp())}
    fine = jwt.encode({**claims, "exp": now + 60}, _token_key(srv.services), algorithm="HS256")
    forever = jwt.encode({**claims, "exp": now + LOGIN_DURATION_SECONDS + 60},
                         _token_key(srv.services), algorithm="HS256")
    with httpx.Client(base_url=f"{srv.endpoint}/api/v1") as anon:
        me = anon.get("/user", headers={"Authorization": f"Bearer {fine}"})
        assert me.status_code == 200, me.text
        me = anon.get("/user", headers={"Authorization": f"Bearer {forever}"})
        assert me.status_code == 401


# --- group ACLs --------------------------------------------------------------------------
def test_group_acls_grant_what_they_say(srv: LiveServer, http: httpx.Client) -> None:
    """lakeFS's simplified permissions: an ACL on a group is a policy its members get."""
    group, reader, other = name("aclgroup"), name("acluser"), name("aclrepo")
    assert http.post("/auth/groups", json={"id": group}).status_code == 201
    assert http.get(f"/auth/groups/{group}/acl").status_code == 404  # none set yet
    auth = srv.services.auth
    auth.create_user(reader)
    auth.add_user_to_group(reader, group)
    cred = auth.create_credentials(reader)
    for repo in ("aclmine", other):
        assert http.post("/repositories", json={
            "name": repo, "storage_namespace": f"local://{repo}"}).status_code == 201
    with srv.client(cred.access_key_id, cred.secret) as member:
        assert member.get("/repositories/aclmine").status_code == 403
        # Read on one repository
        assert http.post(f"/auth/groups/{group}/acl", json={
            "permission": "Read", "repositories": ["aclmine"]}).status_code == 201
        assert http.get(f"/auth/groups/{group}/acl").json() == {
            "permission": "Read", "all_repositories": False, "repositories": ["aclmine"]}
        assert member.get("/repositories/aclmine").status_code == 200
        assert member.get(f"/repositories/{other}").status_code == 403
        assert member.post("/repositories/aclmine/branches", json={
            "name": "dev", "source": "main"}).status_code == 403
        # Write on every repository replaces it
        assert http.post(f"/auth/groups/{group}/acl", json={
            "permission": "Write", "all_repositories": True}).status_code == 201
        assert http.get(f"/auth/groups/{group}/acl").json() == {
            "permission": "Write", "all_repositories": True, "repositories": []}
        assert member.post(f"/repositories/{other}/branches", json={
            "name": "dev", "source": "main"}).status_code == 201
        assert member.get("/auth/users").status_code == 403  # not Admin
        assert len([p for p in auth.list_group_policies(group)
                    if p.name.startswith("ACL(_-_)")]) == 1
    # bad input: unknown permission, a scoped Admin, no repositories, a bad name
    for body in ({"permission": "Owner"}, {"permission": "Admin", "repositories": ["a1b"]},
                 {"permission": "Read", "all_repositories": False},
                 {"permission": "Read", "repositories": ["Bad Name"]}):
        resp = http.post(f"/auth/groups/{group}/acl", json=body)
        assert resp.status_code == 400, (body, resp.text)
    assert http.post("/auth/groups/no-such-group/acl",
                     json={"permission": "Read"}).status_code == 404
    assert http.get(f"/auth/groups/{group}/acl").json()["permission"] == "Write"  # unchanged


def test_auth_capabilities_need_no_login(srv: LiveServer) -> None:
    resp = httpx.get(f"{srv.endpoint}/api/v1/auth/capabilities", timeout=10)
    assert resp.status_code == 200
    assert resp.json() == {"invite_user": False, "forgot_password": False}


def test_failed_sign_ins_slow_the_guesser_down_not_the_owner(srv: LiveServer) -> None:
    """Basic auth and ``/auth/login`` share one limit, keyed by the client's address and
    key: a guesser waits ever longer (429); the owner elsewhere is never refused."""
    with srv.patient_sign_in_throttle():
        key, secret = srv.repo_writer("guessed-api", "any-repo")
        with httpx.Client(base_url=srv.api, timeout=30) as guesser:
            for _ in range(FREE_PAIR_FAILURES + 1):
                assert guesser.get("/user", auth=(key, "guess")).status_code == 401
            for refused in (guesser.get("/user", auth=(key, secret)),
                            guesser.post("/auth/login", json={"access_key_id": key,
                                                              "secret_access_key": secret})):
                assert refused.status_code == 429, refused.text
                assert "too many failed sign-ins" in refused.json()["message"]
                assert 0 < int(refused.headers["retry-after"]) <= 300
        elsewhere = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=srv.api, timeout=30, transport=elsewhere) as owner:
            assert owner.get("/user", auth=(key, secret)).status_code == 200
            assert owner.post("/auth/login", json={"access_key_id": key,
                                                   "secret_access_key": secret}).status_code == 200
        # failed logins count too, from their own address
        with httpx.Client(base_url=srv.api, timeout=30, transport=elsewhere) as guesser:
            for _ in range(FREE_PAIR_FAILURES + 1):
                assert guesser.post("/auth/login", json={
                    "access_key_id": key, "secret_access_key": "guess"}).status_code == 401
            assert guesser.get("/user", auth=(key, secret)).status_code == 429
