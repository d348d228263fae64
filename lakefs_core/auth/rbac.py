"""Role-based access control: actions, resources and policy evaluation.

An operation states what it needs as a requirement tree: a :class:`Permission`
(one action on one resource), or :func:`all_of` / :func:`any_of` over requirements.
:func:`evaluate` decides it against a user's effective policies the way lakeFS does:

- a permission is **denied** when any matching statement denies it, **allowed** when
  a matching statement allows it and none denies it, **neutral** otherwise;
- ``all_of`` is allowed when every child is allowed, denied when a child is denied;
- ``any_of`` is allowed when a child is allowed and none is denied (a deny anywhere
  wins);
- neutral at the top means denied.

Patterns use ``*`` (any run of characters, ``/`` included) and ``?`` (one character)
in both actions and resources. ARN patterns are matched field by field
(``arn:partition:service:region:account:resource``); a pattern of ``*`` matches any
resource. ``${user}`` in a statement's resource is replaced by the requesting user.

Typical use::

    policies = store.effective_policies(username)
    check(policies, all_of(Permission(READ_OBJECT, object_arn(repo, path))),
          username=username)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from lakefs_core.auth.model import Effect, Policy
from lakefs_core.errors import PermissionDeniedError

# --- actions -----------------------------------------------------------------------
READ_REPOSITORY = "fs:ReadRepository"
CREATE_REPOSITORY = "fs:CreateRepository"
UPDATE_REPOSITORY = "fs:UpdateRepository"
DELETE_REPOSITORY = "fs:DeleteRepository"
LIST_REPOSITORIES = "fs:ListRepositories"
ATTACH_STORAGE_NAMESPACE = "fs:AttachStorageNamespace"
IMPORT_FROM_STORAGE = "fs:ImportFromStorage"
IMPORT_CANCEL = "fs:ImportCancel"
READ_OBJECT = "fs:ReadObject"
WRITE_OBJECT = "fs:WriteObject"
DELETE_OBJECT = "fs:DeleteObject"
LIST_OBJECTS = "fs:ListObjects"
CREATE_COMMIT = "fs:CreateCommit"
READ_COMMIT = "fs:ReadCommit"
LIST_COMMITS = "fs:ListCommits"
CREATE_BRANCH = "fs:CreateBranch"
DELETE_BRANCH = "fs:DeleteBranch"
READ_BRANCH = "fs:ReadBranch"
REVERT_BRANCH = "fs:RevertBranch"
LIST_BRANCHES = "fs:ListBranches"
CREATE_TAG = "fs:CreateTag"
DELETE_TAG = "fs:DeleteTag"
READ_TAG = "fs:ReadTag"
LIST_TAGS = "fs:ListTags"
READ_CONFIG = "fs:ReadConfig"

READ_PULL_REQUEST = "pr:ReadPullRequest"
CREATE_PULL_REQUEST = "pr:CreatePullRequest"
WRITE_PULL_REQUEST = "pr:WritePullRequest"
LIST_PULL_REQUESTS = "pr:ListPullRequests"
#: create/edit mirrors of a source repository, and write to its mirror branches
MIRROR_REPOSITORY = "fs:MirrorRepository"

READ_USER = "auth:ReadUser"
CREATE_USER = "auth:CreateUser"
DELETE_USER = "auth:DeleteUser"
LIST_USERS = "auth:ListUsers"
READ_GROUP = "auth:ReadGroup"
CREATE_GROUP = "auth:CreateGroup"
DELETE_GROUP = "auth:DeleteGroup"
LIST_GROUPS = "auth:ListGroups"
ADD_GROUP_MEMBER = "auth:AddGroupMember"
REMOVE_GROUP_MEMBER = "auth:RemoveGroupMember"
READ_POLICY = "auth:ReadPolicy"
CREATE_POLICY = "auth:CreatePolicy"
UPDATE_POLICY = "auth:UpdatePolicy"
DELETE_POLICY = "auth:DeletePolicy"
LIST_POLICIES = "auth:ListPolicies"
ATTACH_POLICY = "auth:AttachPolicy"
DETACH_POLICY = "auth:DetachPolicy"
READ_CREDENTIALS = "auth:ReadCredentials"
CREATE_CREDENTIALS = "auth:CreateCredentials"
DELETE_CREDENTIALS = "auth:DeleteCredentials"
LIST_CREDENTIALS = "auth:ListCredentials"

READ_ACTIONS = "ci:ReadAction"
PREPARE_GARBAGE_COLLECTION_COMMITS = "retention:PrepareGarbageCollectionCommits"
PREPARE_GARBAGE_COLLECTION_UNCOMMITTED = "retention:PrepareGarbageCollectionUncommitted"
GET_GARBAGE_COLLECTION_RULES = "retention:GetGarbageCollectionRules"
SET_GARBAGE_COLLECTION_RULES = "retention:SetGarbageCollectionRules"
# lakeFS files branch protection under its own service, not under ``fs:``
GET_BRANCH_PROTECTION_RULES = "branches:GetBranchProtectionRules"
SET_BRANCH_PROTECTION_RULES = "branches:SetBranchProtectionRules"

#: any resource
ALL = "*"


# --- resources -----------------------------------------------------------------------
def repository_arn(repo: str) -> str:
    """``arn:lakefs:fs:::repository/<repo>``."""
    return f"arn:lakefs:fs:::repository/{repo}"


def object_arn(repo: str, path: str) -> str:
    """``arn:lakefs:fs:::repository/<repo>/object/<path>``."""
    return f"arn:lakefs:fs:::repository/{repo}/object/{path}"


def branch_arn(repo: str, branch: str) -> str:
    """``arn:lakefs:fs:::repository/<repo>/branch/<branch>``."""
    return f"arn:lakefs:fs:::repository/{repo}/branch/{branch}"


def tag_arn(repo: str, tag: str) -> str:
    """``arn:lakefs:fs:::repository/<repo>/tag/<tag>``."""
    return f"arn:lakefs:fs:::repository/{repo}/tag/{tag}"


def storage_namespace_arn(namespace: str) -> str:
    """``arn:lakefs:fs:::namespace/<namespace>`` (e.g. ``namespace/s3://bucket/prefix``)."""
    return f"arn:lakefs:fs:::namespace/{namespace}"


def user_arn(username: str) -> str:
    """``arn:lakefs:auth:::user/<username>``."""
    return f"arn:lakefs:auth:::user/{username}"


def group_arn(group: str) -> str:
    """``arn:lakefs:auth:::group/<group>``."""
    return f"arn:lakefs:auth:::group/{group}"


def policy_arn(policy: str) -> str:
    """``arn:lakefs:auth:::policy/<policy>``."""
    return f"arn:lakefs:auth:::policy/{policy}"


# --- requirements ------------------------------------------------------------------
@dataclass(frozen=True)
class Permission:
    """One action on one resource (a concrete ARN, not a pattern)."""

    action: str
    resource: str


@dataclass(frozen=True)
class AllOf:
    """Every requirement must be allowed."""

    requirements: tuple[Requirement, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one requirement must be allowed (and none denied)."""

    requirements: tuple[Requirement, ...]


Requirement = Permission | AllOf | AnyOf


def all_of(*requirements: Requirement) -> AllOf:
    """A requirement met when all of ``requirements`` are allowed.

    An empty ``all_of()`` is never met: an operation must name what it needs.
    """
    return AllOf(tuple(requirements))


def any_of(*requirements: Requirement) -> AnyOf:
    """A requirement met when one of ``requirements`` is allowed and none is denied."""
    return AnyOf(tuple(requirements))


class Decision(Enum):
    """Outcome of evaluating a requirement."""

    ALLOW = "allow"
    DENY = "deny"
    NEUTRAL = "neutral"


# --- matching ------------------------------------------------------------------------
def wildcard_match(pattern: str, value: str) -> bool:
    """Whether ``value`` matches ``pattern`` (``*`` any run, ``?`` one character)."""
    return _matcher(pattern)(value)


def _has_wildcard(text: str) -> bool:
    return "*" in text or "?" in text


@functools.lru_cache(maxsize=4096)
def _matcher(pattern: str) -> Callable[[str], bool]:
    """A test of values against ``pattern``, made once per pattern: the patterns of
    policies are mostly a name, ``*``, or a prefix and ``*``, tested at once."""
    if pattern == "*":
        return lambda value: True
    if not _has_wildcard(pattern):
        return pattern.__eq__
    head = pattern[:-1]
    if pattern[-1] == "*" and not _has_wildcard(head):
        return lambda value: value.startswith(head)
    return functools.partial(_scan, pattern)


def _scan(pattern: str, value: str) -> bool:
    """:func:`wildcard_match`, character by character."""
    p = v = 0
    star_p, star_v = -1, 0
    while v < len(value):
        if p < len(pattern) and pattern[p] == "*":  # a wildcard, even facing a "*"
            star_p, star_v = p, v
            p += 1
        elif p < len(pattern) and (pattern[p] == "?" or pattern[p] == value[v]):
            p += 1
            v += 1
        elif star_p >= 0:
            # backtrack: let the last star swallow one more character
            star_v += 1
            p, v = star_p + 1, star_v
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


_ARN_FIELDS = 6  # arn:partition:service:region:account:resource


def arn_match(pattern: str, resource: str) -> bool:
    """Whether ``resource`` matches the ARN ``pattern``, field by field.

    ``*`` matches every resource. A pattern or resource that is not an ARN is
    matched as a plain wildcard string.
    """
    return _arn_matcher(pattern)(resource)


@functools.lru_cache(maxsize=4096)
def _arn_matcher(pattern: str) -> Callable[[str], bool]:
    """:func:`arn_match`'s test for ``pattern``, made once per pattern."""
    if pattern == ALL:
        return lambda resource: True
    pat_fields = pattern.split(":", _ARN_FIELDS - 1)
    if len(pat_fields) != _ARN_FIELDS or pat_fields[0] != "arn":
        return _matcher(pattern)
    fields = [_matcher(field) for field in pat_fields]
    if not any(_has_wildcard(field) for field in pat_fields[:-1]):
        # the usual ARN: a resource with exactly these first five fields, then a match
        # of the last one (the first five of a pattern hold no ``:``)
        prefix = ":".join(pat_fields[:-1]) + ":"
        last = fields[-1]
        return lambda resource: resource.startswith(prefix) and last(resource[len(prefix):])

    def match(resource: str) -> bool:
        res_fields = resource.split(":", _ARN_FIELDS - 1)
        if len(res_fields) != _ARN_FIELDS or res_fields[0] != "arn":
            return _scan(pattern, resource)
        return all(test(r) for test, r in zip(fields, res_fields, strict=True))

    return match


#: a user name's ``*`` and ``?`` stand in a pattern as these (private use) characters, so
#: that ``${user}`` is substituted literally: only the policy's own wildcards match runs
_LITERAL = str.maketrans({"*": "\ue000", "?": "\ue001"})


def _interpolate(resource: str, username: str | None) -> str:
    """A statement's resource pattern with ``${user}`` replaced by the user's name,
    literally (see :data:`_LITERAL`)."""
    if username is None or "${" not in resource:
        return resource
    return resource.replace("${user}", username.translate(_LITERAL))


# --- evaluation ----------------------------------------------------------------------
def _evaluate_permission(policies: list[Policy], perm: Permission,
                         username: str | None) -> Decision:
    decision = Decision.NEUTRAL
    resource = perm.resource.translate(_LITERAL)  # as a substituted name reads
    for policy in policies:
        for statement in policy.statements:
            if not any(wildcard_match(a, perm.action) for a in statement.action):
                continue
            if not any(arn_match(_interpolate(r, username), resource)
                       for r in statement.resources()):
                continue
            if statement.effect is Effect.DENY:
                return Decision.DENY
            decision = Decision.ALLOW
    return decision


#: the actions whose statements a :class:`PolicyIndex` keeps at most (lakeFS names
#: about a hundred)
_INDEXED_ACTIONS = 512


class PolicyIndex:
    """A user's policies arranged for deciding many permissions: for each action, the
    resource tests of the statements that deny it and of those that allow it, found at
    the action's first decision. Decides as :func:`evaluate` does, without going
    through every statement's action patterns again for each permission.

    Args:
        policies: The user's effective policies.
        username: The user, substituted for ``${user}`` in resources.
    """

    def __init__(self, policies: Iterable[Policy], username: str | None) -> None:
        self._statements = [
            (statement.effect is Effect.DENY,
             tuple(_matcher(a) for a in statement.action),
             tuple(_arn_matcher(_interpolate(r, username)) for r in statement.resources()))
            for policy in policies for statement in policy.statements]
        self._by_action: dict[str, tuple[tuple[Callable[[str], bool], ...],
                                         tuple[Callable[[str], bool], ...]]] = {}

    def _tests(self, action: str) -> tuple[tuple[Callable[[str], bool], ...],
                                           tuple[Callable[[str], bool], ...]]:
        """The resource tests of the statements denying ``action``, and allowing it."""
        found = self._by_action.get(action)
        if found is None:
            deny: list[Callable[[str], bool]] = []
            allow: list[Callable[[str], bool]] = []
            for denies, actions, resources in self._statements:
                if any(test(action) for test in actions):
                    (deny if denies else allow).extend(resources)
            found = (tuple(deny), tuple(allow))
            if len(self._by_action) < _INDEXED_ACTIONS:
                self._by_action[action] = found
        return found

    def decide(self, perm: Permission) -> Decision:
        """What the policies decide for one permission (a matching deny wins)."""
        deny, allow = self._tests(perm.action)
        resource = perm.resource
        if "*" in resource or "?" in resource:
            resource = resource.translate(_LITERAL)  # as a substituted name reads
        for test in deny:
            if test(resource):
                return Decision.DENY
        for test in allow:
            if test(resource):
                return Decision.ALLOW
        return Decision.NEUTRAL

    def evaluate(self, requirement: Requirement) -> Decision:
        """See :func:`evaluate`."""
        return _combine(self.decide, requirement)

    def check(self, requirement: Requirement) -> None:
        """See :func:`check`."""
        if self.evaluate(requirement) is not Decision.ALLOW:
            raise PermissionDeniedError("insufficient permissions")


def _evaluate(policies: list[Policy], requirement: Requirement,
              username: str | None) -> Decision:
    return _combine(lambda perm: _evaluate_permission(policies, perm, username), requirement)


def _combine(decide: Callable[[Permission], Decision], requirement: Requirement) -> Decision:
    """The decision on ``requirement`` from ``decide``'s on each of its permissions."""
    if isinstance(requirement, Permission):
        return decide(requirement)
    if isinstance(requirement, AllOf):
        if not requirement.requirements:
            return Decision.NEUTRAL
        decision = Decision.ALLOW
        for child in requirement.requirements:
            result = _combine(decide, child)
            if result is Decision.DENY:
                return Decision.DENY
            if result is Decision.NEUTRAL:
                decision = Decision.NEUTRAL
        return decision
    if isinstance(requirement, AnyOf):
        decision = Decision.NEUTRAL
        for child in requirement.requirements:
            result = _combine(decide, child)
            if result is Decision.DENY:
                return Decision.DENY
            if result is Decision.ALLOW:
                decision = Decision.ALLOW
        return decision
    raise TypeError(f"not a requirement: {requirement!r}")


def evaluate(policies: Iterable[Policy], requirement: Requirement, *,
             username: str | None = None) -> Decision:
    """Decide ``requirement`` against ``policies``.

    Args:
        policies: The user's effective policies (direct and through groups).
        requirement: What the operation needs.
        username: The requesting user, substituted for ``${user}`` in resources.

    Returns:
        ALLOW, DENY (an explicit deny matched) or NEUTRAL (nothing matched).
    """
    return _evaluate(list(policies), requirement, username)


def authorize(policies: Iterable[Policy], requirement: Requirement, *,
              username: str | None = None) -> bool:
    """Whether ``policies`` allow ``requirement`` (see :func:`evaluate`)."""
    return evaluate(policies, requirement, username=username) is Decision.ALLOW


def check(policies: Iterable[Policy], requirement: Requirement, *,
          username: str | None = None) -> None:
    """Raise unless ``policies`` allow ``requirement``.

    Raises:
        PermissionDeniedError: "insufficient permissions" (denied or not allowed).
    """
    if not authorize(policies, requirement, username=username):
        raise PermissionDeniedError("insufficient permissions")
