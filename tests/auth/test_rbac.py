"""Policy evaluation: the built-in roles, deny statements, wildcards and requirement trees."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakefs_core.auth import (
    BaseAuthStore,
    Decision,
    Effect,
    Permission,
    Policy,
    Statement,
    all_of,
    any_of,
    authorize,
    builtin,
    check,
    evaluate,
    rbac,
)
from lakefs_core.auth.rbac import arn_match, wildcard_match
from lakefs_core.errors import PermissionDeniedError, ValidationError

BUILTINS = {p.name: p for p in builtin.builtin_policies()}


def _role(group: str) -> list[Policy]:
    return [BUILTINS[name] for name in builtin.BUILTIN_GROUPS[group]]


def _allow(actions: list[str], resource: str = "*") -> Statement:
    return Statement(effect=Effect.ALLOW, action=actions, resource=resource)


def _deny(actions: list[str], resource: str = "*") -> Statement:
    return Statement(effect=Effect.DENY, action=actions, resource=resource)


REPO = rbac.repository_arn("repo1")
OBJ = rbac.object_arn("repo1", "data/part-0.parquet")
BRANCH = rbac.branch_arn("repo1", "main")

# (action, resource) -> allowed for Viewers, Developers, SuperUsers, Admins
MATRIX = [
    (rbac.LIST_REPOSITORIES, "*", (True, True, True, True)),
    (rbac.READ_REPOSITORY, REPO, (True, True, True, True)),
    (rbac.READ_OBJECT, OBJ, (True, True, True, True)),
    (rbac.LIST_OBJECTS, REPO, (True, True, True, True)),
    (rbac.READ_COMMIT, REPO, (True, True, True, True)),
    (rbac.WRITE_OBJECT, OBJ, (False, True, True, True)),
    (rbac.DELETE_OBJECT, OBJ, (False, True, True, True)),
    (rbac.CREATE_COMMIT, BRANCH, (False, True, True, True)),
    (rbac.CREATE_BRANCH, BRANCH, (False, True, True, True)),
    (rbac.CREATE_REPOSITORY, REPO, (False, False, True, True)),
    (rbac.DELETE_REPOSITORY, REPO, (False, False, True, True)),
    (rbac.ATTACH_STORAGE_NAMESPACE, rbac.storage_namespace_arn("s3://b/p"),
     (False, False, True, True)),
    (rbac.MIRROR_REPOSITORY, REPO, (False, False, True, True)),
    (rbac.SET_BRANCH_PROTECTION_RULES, REPO, (False, False, False, True)),
    (rbac.GET_BRANCH_PROTECTION_RULES, REPO, (False, True, True, True)),
    (rbac.READ_CONFIG, "*", (True, True, True, True)),
    (rbac.CREATE_USER, rbac.user_arn("bob"), (False, False, False, True)),
    (rbac.CREATE_CREDENTIALS, rbac.user_arn("alice"), (True, True, True, True)),
    (rbac.CREATE_CREDENTIALS, rbac.user_arn("bob"), (False, False, False, True)),
    (rbac.LIST_CREDENTIALS, rbac.user_arn("alice"), (True, True, True, True)),
]


@pytest.mark.parametrize("action, resource, expected", MATRIX,
                         ids=[f"{a}@{r}" for a, r, _ in MATRIX])
def test_builtin_roles(action: str, resource: str, expected: tuple[bool, ...]) -> None:
    roles = (builtin.VIEWERS, builtin.DEVELOPERS, builtin.SUPER_USERS, builtin.ADMINS)
    got = tuple(authorize(_role(g), Permission(action, resource), username="alice")
                for g in roles)
    assert got == expected


def test_no_policies_means_denied() -> None:
    assert evaluate([], Permission(rbac.READ_OBJECT, OBJ)) is Decision.NEUTRAL
    assert not authorize([], Permission(rbac.READ_OBJECT, OBJ))


def test_deny_overrides_allow_whatever_the_order() -> None:
    deny_prod = Policy("NoProdWrites", [_deny(["fs:Write*", "fs:Delete*"],
                                              rbac.repository_arn("prod") + "/*")])
    for policies in (_role(builtin.ADMINS) + [deny_prod], [deny_prod] + _role(builtin.ADMINS)):
        prod_obj = rbac.object_arn("prod", "a")
        assert evaluate(policies, Permission(rbac.WRITE_OBJECT, prod_obj)) is Decision.DENY
        assert not authorize(policies, Permission(rbac.DELETE_OBJECT, prod_obj))
        assert authorize(policies, Permission(rbac.READ_OBJECT, prod_obj))
        assert authorize(policies, Permission(rbac.WRITE_OBJECT, rbac.object_arn("dev", "a")))
        # the repository itself is not under "prod/*"
        assert authorize(policies, Permission(rbac.DELETE_REPOSITORY, rbac.repository_arn("prod")))


def test_deny_within_one_policy() -> None:
    policy = Policy("P", [_allow(["fs:*"]), _deny(["fs:DeleteRepository"])])
    assert authorize([policy], Permission(rbac.CREATE_REPOSITORY, REPO))
    assert not authorize([policy], Permission(rbac.DELETE_REPOSITORY, REPO))


@pytest.mark.parametrize("pattern, value, expected", [
    ("*", "", True),
    ("*", "anything/at:all", True),
    ("fs:Read*", "fs:ReadObject", True),
    ("fs:Read*", "fs:ReadRepository", True),
    ("fs:Read*", "fs:WriteObject", False),
    ("fs:*Object", "fs:DeleteObject", True),
    ("fs:*Object", "fs:ListObjects", False),
    ("fs:Read?bject", "fs:ReadObject", True),
    ("fs:Read?bject", "fs:ReadObbject", False),
    ("a*b*c", "aXXbYYc", True),
    ("a*b*c", "aXXcYYb", False),
    ("*a*a*a", "aaaa", True),
    ("?", "", False),
    ("", "", True),
    ("fs:ReadObject", "fs:readobject", False),  # case-sensitive
])
def test_wildcard_match(pattern: str, value: str, expected: bool) -> None:
    assert wildcard_match(pattern, value) is expected


@pytest.mark.parametrize("pattern, resource, expected", [
    ("*", REPO, True),
    ("*", "*", True),
    ("arn:lakefs:fs:::repository/*", OBJ, True),
    ("arn:lakefs:fs:::repository/repo1", OBJ, False),
    ("arn:lakefs:fs:::repository/repo1/*", OBJ, True),
    ("arn:lakefs:fs:::repository/repo?", REPO, True),
    ("arn:lakefs:fs:::repository/repo?", rbac.repository_arn("repo12"), False),
    ("arn:lakefs:fs:::repository/repo1/object/data/*", OBJ, True),
    ("arn:lakefs:fs:::repository/repo1/object/logs/*", OBJ, False),
    ("arn:lakefs:*:::*", rbac.user_arn("bob"), True),
    ("arn:lakefs:fs:::*", rbac.user_arn("bob"), False),
    ("arn:lakefs:auth:::user/*", rbac.user_arn("bob"), True),
    # ':' inside an object path belongs to the resource field
    ("arn:lakefs:fs:::repository/r/object/a:b*", rbac.object_arn("r", "a:b:c"), True),
    ("arn:lakefs:fs:::namespace/s3://bucket/*", rbac.storage_namespace_arn("s3://bucket/x"),
     True),
    ("arn:lakefs:fs:::namespace/s3://bucket/*", rbac.storage_namespace_arn("s3://other/x"),
     False),
    ("arn:lakefs:fs:::repository/*", "*", False),
])
def test_arn_match(pattern: str, resource: str, expected: bool) -> None:
    assert arn_match(pattern, resource) is expected


def _reference_match(pattern: str, value: str) -> bool:
    """Wildcard matching by its definition: a regular expression per pattern."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def _reference_arn_match(pattern: str, resource: str) -> bool:
    if pattern == "*":
        return True
    pat, res = pattern.split(":", 5), resource.split(":", 5)
    if len(pat) != 6 or len(res) != 6 or pat[0] != "arn" or res[0] != "arn":
        return _reference_match(pattern, resource)
    return all(_reference_match(p, r) for p, r in zip(pat, res, strict=True))


_PIECES = st.sampled_from(["arn", "lakefs", "fs", ":", "*", "?", "a", "b", "/", "repository/",
                           "x:y"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_PIECES, max_size=9).map("".join), st.lists(_PIECES, max_size=9).map("".join))
def test_matchers_made_once_per_pattern_match_as_the_definition(pattern: str,
                                                                value: str) -> None:
    """The tests made once per pattern (a name, ``*``, a prefix, an ARN's last field)
    answer as matching by the definition does."""
    assert wildcard_match(pattern, value) is _reference_match(pattern, value)
    assert arn_match(pattern, value) is _reference_arn_match(pattern, value)
    arn = "arn:lakefs:fs:::" + value
    for candidate in (pattern, "arn:lakefs:fs:::" + pattern, "arn:lakefs:*:::" + pattern):
        assert arn_match(candidate, arn) is _reference_arn_match(candidate, arn)


def test_user_variable_in_resources() -> None:
    policies = [BUILTINS[builtin.AUTH_MANAGE_OWN_CREDENTIALS]]
    own = Permission(rbac.CREATE_CREDENTIALS, rbac.user_arn("alice"))
    assert authorize(policies, own, username="alice")
    assert not authorize(policies, own, username="bob")
    assert not authorize(policies, own)  # no user, no substitution


@pytest.mark.parametrize("name", ["*", "?", "a*", "adm?n"])
def test_user_variable_is_substituted_literally(name: str) -> None:
    """A user named with wildcards (possible in databases of earlier versions) gets
    its own credentials' permission, not everybody's."""
    policies = [BUILTINS[builtin.AUTH_MANAGE_OWN_CREDENTIALS]]
    assert authorize(policies, Permission(rbac.CREATE_CREDENTIALS, rbac.user_arn(name)),
                     username=name)
    for other in ("admin", "alice", "a", ""):
        assert not authorize(policies,
                             Permission(rbac.CREATE_CREDENTIALS, rbac.user_arn(other)),
                             username=name), other
    # a policy's own wildcards still match names with those characters
    everyone = [Policy("all-users", [Statement(Effect.ALLOW, [rbac.CREATE_CREDENTIALS],
                                               "arn:lakefs:auth:::user/*")])]
    assert authorize(everyone, Permission(rbac.CREATE_CREDENTIALS, rbac.user_arn(name)))


@pytest.mark.parametrize("name", ["*", "a?b", "a/b", "a:b", "a b", "", "x" * 128, "ü"])
def test_new_entities_need_lakefs_ids(store: BaseAuthStore, name: str) -> None:
    with pytest.raises(ValidationError):
        store.create_user(name)
    with pytest.raises(ValidationError):
        store.create_group(name)
    with pytest.raises(ValidationError):
        store.create_policy(Policy(name, [Statement(Effect.ALLOW, ["fs:*"], "*")]))
    for ok in ("alice", "a.b@example.com", "svc+x=1,y-2_z", "x" * 127):
        store.create_user(ok)


def test_resource_list() -> None:
    policy = Policy("TwoRepos", [_allow(
        ["fs:ReadObject"],
        '["arn:lakefs:fs:::repository/a/*", "arn:lakefs:fs:::repository/b/*"]')])
    assert authorize([policy], Permission(rbac.READ_OBJECT, rbac.object_arn("a", "x")))
    assert authorize([policy], Permission(rbac.READ_OBJECT, rbac.object_arn("b", "x")))
    assert not authorize([policy], Permission(rbac.READ_OBJECT, rbac.object_arn("c", "x")))


def test_requirement_trees() -> None:
    policies = [Policy("P", [
        _allow([rbac.READ_OBJECT, rbac.WRITE_OBJECT]),
        _deny([rbac.DELETE_OBJECT]),
    ])]
    read, write = Permission(rbac.READ_OBJECT, OBJ), Permission(rbac.WRITE_OBJECT, OBJ)
    delete, commit = Permission(rbac.DELETE_OBJECT, OBJ), Permission(rbac.CREATE_COMMIT, BRANCH)

    assert authorize(policies, all_of(read, write))
    assert evaluate(policies, all_of(read, commit)) is Decision.NEUTRAL
    assert evaluate(policies, all_of(read, delete)) is Decision.DENY
    assert not authorize(policies, all_of())

    assert authorize(policies, any_of(commit, read))
    assert evaluate(policies, any_of(commit)) is Decision.NEUTRAL
    # a deny anywhere wins, even when another branch is allowed
    assert evaluate(policies, any_of(read, delete)) is Decision.DENY
    assert not authorize(policies, any_of(read, delete))

    assert authorize(policies, all_of(read, any_of(commit, write)))
    assert not authorize(policies, all_of(read, any_of(commit, delete)))


def test_check_raises_insufficient_permissions() -> None:
    viewers = _role(builtin.VIEWERS)
    check(viewers, Permission(rbac.READ_OBJECT, OBJ))
    with pytest.raises(PermissionDeniedError, match="insufficient permissions"):
        check(viewers, Permission(rbac.WRITE_OBJECT, OBJ))


def test_narrow_replication_policy_from_the_mirroring_guide(store: BaseAuthStore) -> None:
    """A replication user scoped to one source, one mirror and one namespace."""
    src, mirror, ns = "src-repo", "src-repo-mirror", "s3://dr-bucket/mirrors/src"
    reads = ["fs:ReadRepository", "fs:ReadObject", "fs:ListObjects", "fs:ReadCommit",
             "fs:ListCommits", "fs:ReadBranch", "fs:ListBranches"]
    writes = reads + ["fs:CreateRepository", "fs:UpdateRepository", "fs:DeleteRepository",
                      "fs:AttachStorageNamespace", "fs:WriteObject", "fs:DeleteObject",
                      "fs:CreateCommit", "fs:CreateBranch", "fs:DeleteBranch",
                      "fs:RevertBranch"]
    store.create_policy(Policy.from_dict({"id": "ReplicationPolicy", "statement": [
        {"action": ["fs:ListRepositories"], "effect": "allow", "resource": "*"},
        {"action": reads, "effect": "allow", "resource": rbac.repository_arn(src)},
        {"action": writes, "effect": "allow", "resource": rbac.repository_arn(mirror)},
        {"action": ["fs:AttachStorageNamespace"], "effect": "allow",
         "resource": rbac.storage_namespace_arn(ns)},
    ]}))
    store.create_user("replicator")
    store.attach_policy_to_user("replicator", "ReplicationPolicy")
    policies = store.effective_policies("replicator")

    def allowed(action: str, resource: str) -> bool:
        return authorize(policies, Permission(action, resource), username="replicator")

    assert allowed(rbac.LIST_REPOSITORIES, "*")
    assert allowed(rbac.READ_BRANCH, rbac.repository_arn(src))
    assert not allowed(rbac.WRITE_OBJECT, rbac.repository_arn(src))
    assert allowed(rbac.CREATE_REPOSITORY, rbac.repository_arn(mirror))
    assert allowed(rbac.ATTACH_STORAGE_NAMESPACE, rbac.storage_namespace_arn(ns))
    assert not allowed(rbac.ATTACH_STORAGE_NAMESPACE, rbac.storage_namespace_arn("s3://x/y"))
    # creating a mirror also needs fs:MirrorRepository on the source: not granted here
    create_mirror = all_of(
        Permission(rbac.CREATE_REPOSITORY, rbac.repository_arn(mirror)),
        Permission(rbac.MIRROR_REPOSITORY, rbac.repository_arn(src)),
        Permission(rbac.ATTACH_STORAGE_NAMESPACE, rbac.storage_namespace_arn(ns)),
    )
    assert not authorize(policies, create_mirror)
    store.create_policy(Policy("MirrorSrc", [_allow([rbac.MIRROR_REPOSITORY],
                                                    rbac.repository_arn(src))]))
    store.attach_policy_to_user("replicator", "MirrorSrc")
    assert authorize(store.effective_policies("replicator"), create_mirror)


# --- policy validation --------------------------------------------------------------------
@pytest.mark.parametrize("statement", [
    {"effect": "maybe", "action": ["fs:ReadObject"], "resource": "*"},
    {"effect": "allow", "action": [], "resource": "*"},
    {"effect": "allow", "action": "fs:ReadObject", "resource": "*"},
    {"effect": "allow", "action": ["ReadObject"], "resource": "*"},
    {"effect": "allow", "action": ["storage:ReadObject"], "resource": "*"},
    {"effect": "allow", "action": ["fs:Read Object"], "resource": "*"},
    {"effect": "allow", "action": ["fs:ReadObject"], "resource": ""},
    {"effect": "allow", "action": ["fs:ReadObject"], "resource": "[not json"},
    {"effect": "allow", "action": ["fs:ReadObject"], "resource": "[]"},
    {"effect": "allow", "action": ["fs:ReadObject"]},
])
def test_invalid_statements_are_refused(statement: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Policy.from_dict({"id": "P", "statement": [statement]})


def test_policy_json_round_trip() -> None:
    data = {"id": "P", "statement": [
        {"Effect": "Deny", "Action": ["fs:Delete*"], "Resource": "arn:lakefs:fs:::repository/*"},
        {"effect": "allow", "action": ["*"], "resource": "*"},
    ]}
    policy = Policy.from_dict(data)
    assert policy.statements[0].effect is Effect.DENY
    again = Policy.from_dict(policy.to_dict())
    assert again.statements == policy.statements
    assert policy.to_dict()["statement"][0] == {
        "effect": "deny", "action": ["fs:Delete*"], "resource": "arn:lakefs:fs:::repository/*"}
    with pytest.raises(ValidationError):
        Policy.from_dict({"id": "P", "statement": []})
    with pytest.raises(ValidationError):
        Policy.from_dict({"statement": [{"effect": "allow", "action": ["*"], "resource": "*"}]})


_ACTIONS = [rbac.READ_OBJECT, rbac.WRITE_OBJECT, rbac.DELETE_OBJECT, rbac.CREATE_COMMIT,
            rbac.CREATE_CREDENTIALS, rbac.LIST_REPOSITORIES]
_ACTION_PATTERNS = st.sampled_from([*_ACTIONS, "*", "fs:*", "fs:Read*", "fs:?riteObject",
                                    "auth:*", "ci:*"])
_RESOURCE_PATTERNS = st.sampled_from([
    "*", OBJ, REPO, BRANCH, "arn:lakefs:fs:::repository/repo1/*",
    "arn:lakefs:fs:::repository/repo?/object/*", "arn:lakefs:fs:::repository/*",
    "arn:lakefs:auth:::user/${user}", "arn:lakefs:auth:::user/*",
    '["arn:lakefs:fs:::repository/a/*", "arn:lakefs:fs:::repository/repo1/object/*"]',
    "arn:lakefs:*:::repository/repo1", "arn:lakefs:fs:::repository/repo1/object/a*b"])
_RESOURCES = st.sampled_from([
    "*", OBJ, REPO, BRANCH, rbac.object_arn("repo1", "a*b"), rbac.object_arn("repo2", "x"),
    rbac.object_arn("a", "k?"), rbac.user_arn("alice"), rbac.user_arn("a*"),
    rbac.user_arn("bob")])
_STATEMENTS = st.builds(Statement, st.sampled_from([Effect.ALLOW, Effect.DENY]),
                        st.lists(_ACTION_PATTERNS, min_size=1, max_size=3), _RESOURCE_PATTERNS)
_POLICIES = st.lists(st.builds(Policy, st.just("P"), st.lists(_STATEMENTS, min_size=1, max_size=4)),
                     max_size=3)
_PERMISSIONS = st.builds(Permission, st.sampled_from(_ACTIONS), _RESOURCES)
_REQUIREMENTS = st.recursive(
    _PERMISSIONS, lambda children: st.one_of(
        st.lists(children, max_size=3).map(lambda rs: all_of(*rs)),
        st.lists(children, max_size=3).map(lambda rs: any_of(*rs))), max_leaves=6)


@settings(max_examples=500, deadline=None)
@given(_POLICIES, st.lists(_REQUIREMENTS, min_size=1, max_size=4),
       st.sampled_from([None, "alice", "a*", "bob"]))
@example([Policy("Own", [_allow([rbac.CREATE_CREDENTIALS], "arn:lakefs:auth:::user/${user}")])],
         [Permission(rbac.CREATE_CREDENTIALS, rbac.user_arn("a*"))], "a*")
def test_the_policy_index_decides_as_the_statements_do(
        policies: list[Policy], requirements: list[rbac.Requirement],
        username: str | None) -> None:
    """A user's policies arranged by action (what a request's check uses, kept with
    the cached policies) decide every requirement as going through each statement
    does, for the same requirement asked again too."""
    index = rbac.PolicyIndex(policies, username)
    for requirement in requirements * 2:
        expected = evaluate(policies, requirement, username=username)
        assert index.evaluate(requirement) is expected
        if expected is Decision.ALLOW:
            index.check(requirement)
        else:
            with pytest.raises(PermissionDeniedError, match="insufficient permissions"):
                index.check(requirement)


def test_the_principal_of_a_request_decides_with_the_index_kept_beside_its_policies(
        store: BaseAuthStore) -> None:
    """The index is made with the policies when they are read, and dropped with them
    when the auth tables change: a detached policy stops allowing at once."""
    from lakefs_core.auth.service import AuthService

    store.create_user("carol")
    store.create_policy(Policy("Writer", [_allow([rbac.WRITE_OBJECT],
                                                 "arn:lakefs:fs:::repository/repo1/*")]))
    store.attach_policy_to_user("carol", "Writer")
    service = AuthService(store)
    first = service.view().principal("carol")
    assert first.index is not None
    write = Permission(rbac.WRITE_OBJECT, OBJ)
    first.check(write)
    again = service.view().principal("carol")
    assert again.index is first.index  # kept while the tables are unchanged
    store.detach_policy_from_user("carol", "Writer")
    after = service.view().principal("carol")
    assert after.index is not first.index
    with pytest.raises(PermissionDeniedError):
        after.check(write)
    assert not after.allowed(write)
