"""The replication user of seed 003's setup, created through a region's REST API.

Seed 003 ("Creating a lakeFS user with a replicator policy") has the replication
service act as a user holding one policy, ``ReplicationPolicy``, in one of two forms:

- ``broad``: the listed ``fs:`` actions on every resource;
- ``narrow``: ``fs:ListRepositories`` on ``*``, reads on the source repository, the
  mirror's actions on the mirror repository, and ``fs:AttachStorageNamespace`` on the
  mirror's storage namespace.

Both forms add ``fs:ListTags`` to the seed's actions (on the source repository in the
narrow one): mirrors follow the source's tags as well as its branches, and listing
them needs it. Without it branches still follow and the mirror's status says that
tags do not (docs/REPLICATION_CONFIG.md).

The same access key pair is created in every region: the sidecars of a mirror call
each other's servers with it.

One addition, for the ``builtin`` copier reading objects through the source's API
with the narrow policy: the seed grants ``fs:ReadObject`` on
``arn:lakefs:fs:::repository/{source}``, which is not an object's ARN
(``.../repository/{source}/object/{path}``). Such a deployment also attaches
:data:`BUILTIN_COPIER_POLICY_ID`, one statement: ``fs:ReadObject`` on
``arn:lakefs:fs:::repository/{source}/object/*`` (docs/REPLICATION_CONFIG.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lakefs_core.client import API_PREFIX, RestClient

#: the seed's policy id (both forms)
POLICY_ID = "ReplicationPolicy"
#: the extra policy a narrow-policy deployment with the builtin copier (through the
#: source's API) attaches: read the source repository's objects
BUILTIN_COPIER_POLICY_ID = "ReplicationBuiltinCopierReadObjects"

PolicyKind = Literal["narrow", "broad"]
POLICY_KINDS: tuple[PolicyKind, ...] = ("narrow", "broad")

#: the user and keys the harnesses create (the same in every region)
USER_NAME = "replicator"
ACCESS_KEY_ID = "AKIAREPLICATIONE2E01"
SECRET_ACCESS_KEY = "replication/User+Secret/Key/For/Loopback/Only"

_BROAD_ACTIONS = [
    "fs:ReadRepository", "fs:CreateRepository", "fs:UpdateRepository", "fs:DeleteRepository",
    "fs:ListRepositories", "fs:AttachStorageNamespace", "fs:ReadObject", "fs:WriteObject",
    "fs:DeleteObject", "fs:ListObjects", "fs:CreateCommit", "fs:ReadCommit", "fs:ListCommits",
    "fs:CreateBranch", "fs:DeleteBranch", "fs:RevertBranch", "fs:ReadBranch",
    "fs:ListBranches", "fs:ListTags"]
_SOURCE_ACTIONS = ["fs:ReadRepository", "fs:ReadObject", "fs:ListObjects", "fs:ReadCommit",
                   "fs:ListCommits", "fs:ReadBranch", "fs:ListBranches", "fs:ListTags"]
_MIRROR_ACTIONS = [
    "fs:ReadRepository", "fs:CreateRepository", "fs:UpdateRepository", "fs:DeleteRepository",
    "fs:AttachStorageNamespace", "fs:ReadObject", "fs:WriteObject", "fs:DeleteObject",
    "fs:ListObjects", "fs:CreateCommit", "fs:ReadCommit", "fs:ListCommits", "fs:CreateBranch",
    "fs:DeleteBranch", "fs:RevertBranch", "fs:ReadBranch", "fs:ListBranches"]


def broad_replication_policy() -> dict[str, Any]:
    """Seed 003's replication policy, with ``fs:ListTags``: its actions on every resource."""
    return {"id": POLICY_ID, "statement": [
        {"action": list(_BROAD_ACTIONS), "effect": "allow", "resource": "*"}]}


def narrow_replication_policy(source: str, mirror: str, namespace: str) -> dict[str, Any]:
    """Seed 003's narrower replication policy, with ``fs:ListTags`` on the source, for one
    source and one mirror.

    Args:
        source: the source repository (``{sourceRepositoryId}``).
        mirror: the mirror repository's name (``{mirrorId}``).
        namespace: the mirror's storage namespace (``{DestinationStorageNamespace}``).
    """
    return {"id": POLICY_ID, "statement": [
        {"action": ["fs:ListRepositories"], "effect": "allow", "resource": "*"},
        {"action": list(_SOURCE_ACTIONS), "effect": "allow",
         "resource": f"arn:lakefs:fs:::repository/{source}"},
        {"action": list(_MIRROR_ACTIONS), "effect": "allow",
         "resource": f"arn:lakefs:fs:::repository/{mirror}"},
        {"action": ["fs:AttachStorageNamespace"], "effect": "allow",
         "resource": f"arn:lakefs:fs:::namespace/{namespace}"},
    ]}


def without_list_tags(policy: dict[str, Any]) -> dict[str, Any]:
    """``policy`` without ``fs:ListTags`` (as seed 003 wrote it): branches only mirror."""
    return {**policy, "statement": [
        {**s, "action": [a for a in s["action"] if a != "fs:ListTags"]}
        for s in policy["statement"]]}


def builtin_copier_policy(source: str) -> dict[str, Any]:
    """What the builtin copier adds to the narrow policy: read the source's objects."""
    return {"id": BUILTIN_COPIER_POLICY_ID, "statement": [
        {"action": ["fs:ReadObject"], "effect": "allow",
         "resource": f"arn:lakefs:fs:::repository/{source}/object/*"}]}


@dataclass(frozen=True)
class ReplicationUser:
    """The user the sidecars act as: the same keys in every region.

    Attributes:
        name: the user's id.
        access_key_id, secret_access_key: its one access key pair.
        policies: lakeFS policy documents (``id``, ``statement``) attached to it.
    """

    name: str
    access_key_id: str
    secret_access_key: str
    policies: tuple[dict[str, Any], ...]

    @classmethod
    def documented(cls, kind: PolicyKind, *, source: str = "", mirror: str = "",
                   namespace: str = "", builtin_copier: bool = False,
                   name: str = USER_NAME, access_key_id: str = ACCESS_KEY_ID,
                   secret_access_key: str = SECRET_ACCESS_KEY) -> ReplicationUser:
        """A user holding one of seed 003's policies.

        Args:
            kind: ``narrow`` (needs ``source``, ``mirror`` and ``namespace``) or ``broad``.
            builtin_copier: the sidecars copy objects by reading them through the
                source's API; with the narrow policy this adds
                :func:`builtin_copier_policy` (the broad one already covers it).

        Raises:
            ValueError: an unknown kind, or a narrow policy without its names.
        """
        policies: tuple[dict[str, Any], ...]
        if kind == "broad":
            policies = (broad_replication_policy(),)
        elif kind == "narrow":
            if not (source and mirror and namespace):
                raise ValueError("the narrow replication policy needs the source repository, "
                                 "the mirror's name and its storage namespace")
            policies = (narrow_replication_policy(source, mirror, namespace),)
            if builtin_copier:
                policies += (builtin_copier_policy(source),)
        else:
            raise ValueError(f"unknown replication policy {kind!r}: narrow or broad")
        return cls(name, access_key_id, secret_access_key, policies)

    def create_through_api(self, endpoint: str, admin_key: str, admin_secret: str) -> None:
        """Create the user, its policies and its key in one region, as the admin.

        Idempotent: a user, policy or key that exists already is kept (a policy is
        updated to this document), so a region restarted over its data can be given
        the same user again.
        """
        users = f"{API_PREFIX}/auth/users"
        with RestClient(endpoint, admin_key, admin_secret) as api:
            api.request("POST", users, ok=(201, 409), json={"id": self.name})
            for document in self.policies:
                created = api.request("POST", f"{API_PREFIX}/auth/policies", ok=(201, 409),
                                      json=document)
                if created.status_code == 409:
                    api.request("PUT", f"{API_PREFIX}/auth/policies/{document['id']}",
                                json=document)
                api.request("PUT", f"{users}/{self.name}/policies/{document['id']}",
                            ok=(201,))
            known = api.request("GET", f"{users}/{self.name}/credentials/{self.access_key_id}",
                                ok=(200, 404))
            if known.status_code == 404:
                # the chosen secret travels in the body only (never in the query string)
                api.request("POST", f"{users}/{self.name}/credentials", ok=(201,),
                            json={"access_key_id": self.access_key_id,
                                  "secret_access_key": self.secret_access_key})
