"""Auth API: users, access keys, groups, policies and their attachments, and login.

Paths and shapes follow lakeFS's ``AuthApi``. Every handler authorizes with an
``auth:*`` action on the resource it touches (``arn:lakefs:auth:::user/<id>``, ...)
before changing anything. ``POST /auth/login`` trades an access key for a signed
token that the API accepts as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, Literal, TypeVar

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from pydantic import BaseModel, Field, SecretStr

from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    Pagination,
    PrefixQuery,
    filtered_page,
    page_size,
    pagination,
)
from lakefs_core.api.routes.setup import CredentialsWithSecret
from lakefs_core.api.routes.setup import UserModel as User
from lakefs_core.api.security import (
    Ctx,
    authenticated,
    client_address,
    group_arn,
    issue_token,
    policy_arn,
    services_of,
    user_arn,
)
from lakefs_core.auth import acl, model, rbac
from lakefs_core.errors import NotFoundError, ValidationError
from lakefs_core.graveler.refs import validate_repository_id

router = APIRouter(prefix="/auth", tags=["auth"])

T = TypeVar("T")
_ALL = rbac.ALL


# --- shapes -----------------------------------------------------------------------------
class UserList(BaseModel):
    pagination: Pagination
    results: list[User]


class UserCreation(BaseModel):
    id: str
    email: str | None = None
    friendly_name: str | None = None
    invite_user: bool | None = None


class Credentials(BaseModel):
    access_key_id: str
    creation_date: int


class CredentialsList(BaseModel):
    pagination: Pagination
    results: list[Credentials]


class Group(BaseModel):
    id: str
    name: str | None = None
    description: str | None = None
    creation_date: int


class GroupList(BaseModel):
    pagination: Pagination
    results: list[Group]


class GroupCreation(BaseModel):
    id: str
    description: str | None = None


class Statement(BaseModel):
    effect: Literal["allow", "deny"]
    resource: str
    action: list[str] = Field(min_length=1)
    condition: dict[str, dict[str, list[str]]] | None = None


class Policy(BaseModel):
    id: str
    creation_date: int | None = None
    statement: list[Statement] = Field(min_length=1)


class PolicyList(BaseModel):
    pagination: Pagination
    results: list[Policy]


class LoginInformation(BaseModel):
    access_key_id: str
    secret_access_key: str


class AuthenticationToken(BaseModel):
    token: str
    token_expiration: int | None = None


# --- conversions ------------------------------------------------------------------------
def _epoch(when: datetime) -> int:
    return int(when.timestamp())


def _user(user: model.User) -> User:
    return User(id=user.username, creation_date=_epoch(user.creation_date),
                friendly_name=user.friendly_name, email=user.email)


def _group(group: model.Group) -> Group:
    return Group(id=group.name, name=group.name, description=group.description,
                 creation_date=_epoch(group.creation_date))


def _policy(policy: model.Policy) -> Policy:
    return Policy(id=policy.name, creation_date=_epoch(policy.creation_date),
                  statement=[Statement(effect=s.effect.value, resource=s.resource,
                                       action=list(s.action)) for s in policy.statements])


def _policy_model(body: Policy) -> model.Policy:
    """The store's policy from the API shape (conditions are not supported)."""
    statements = []
    for st in body.statement:
        if st.condition:
            raise ValidationError("policy statement conditions are not supported")
        statements.append(model.Statement(effect=model.Effect(st.effect), action=st.action,
                                          resource=st.resource))
    return model.Policy(name=body.id, statements=statements)


def _credentials(cred: model.CredentialSummary | model.Credential) -> Credentials:
    return Credentials(access_key_id=cred.access_key_id,
                       creation_date=_epoch(cred.creation_date))


# --- pagination -------------------------------------------------------------------------
def _page(fetch: Callable[[str, int], Sequence[T]], key: Callable[[T], str], prefix: str,
          after: str, amount: int) -> tuple[list[T], Pagination]:
    """One page of a listing sorted by ``key``, from a store call ``fetch(after, n)``."""
    size = page_size(amount)
    items, has_more = filtered_page(lambda cur, n: list(fetch(cur, n)), key,
                                    lambda item: key(item).startswith(prefix), after, size)
    return items, pagination(len(items), has_more, key(items[-1]) if items else "", size)


def _page_sorted(items: Sequence[T], key: Callable[[T], str], prefix: str, after: str,
                 amount: int) -> tuple[list[T], Pagination]:
    """A page of an in-memory listing."""
    ordered = sorted(items, key=key)
    return _page(lambda cur, n: [i for i in ordered if key(i) > cur][:n], key, prefix, after,
                 amount)


# --- login ------------------------------------------------------------------------------
@router.post("/login", response_model=AuthenticationToken, summary="perform a login")
def login(request: Request, login_information: LoginInformation) -> AuthenticationToken:
    """Trade an access key for a token usable as ``Authorization: Bearer <token>``."""
    services = services_of(request)
    key, secret = login_information.access_key_id, login_information.secret_access_key
    user = services.sign_ins.attempt(client_address(request), key,
                                     lambda: services.auth.authenticate(key, secret))
    token, expires = issue_token(
        services, user.username, access_key_id=login_information.access_key_id,
        user_created=int(user.creation_date.timestamp()))
    return AuthenticationToken(token=token, token_expiration=expires)


# --- users ------------------------------------------------------------------------------
@router.get("/users", response_model=UserList, summary="list users")
def list_users(ctx: Annotated[Ctx, Depends(authenticated)], prefix: PrefixQuery = "",
               after: AfterQuery = "", amount: AmountQuery = 100) -> UserList:
    ctx.check(rbac.LIST_USERS, _ALL)
    users, page = _page(
        lambda cur, n: ctx.services.auth.list_users(prefix=prefix, after=cur, amount=n),
        lambda u: u.username, prefix, after, amount)
    return UserList(pagination=page, results=[_user(u) for u in users])


@router.post("/users", status_code=201, response_model=User, summary="create user")
def create_user(user_creation: UserCreation,
                ctx: Annotated[Ctx, Depends(authenticated)]) -> User:
    ctx.check(rbac.CREATE_USER, user_arn(user_creation.id))
    user = ctx.services.auth.create_user(user_creation.id, email=user_creation.email,
                                         friendly_name=user_creation.friendly_name)
    return _user(user)


@router.get("/users/{userId}", response_model=User, summary="get user")
def get_user(userId: str, ctx: Annotated[Ctx, Depends(authenticated)]) -> User:  # noqa: N803
    ctx.check(rbac.READ_USER, user_arn(userId))
    return _user(ctx.services.auth.get_user(userId))


@router.delete("/users/{userId}", status_code=204, response_class=Response,
               summary="delete user")
def delete_user(userId: str, ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:  # noqa: N803
    ctx.check(rbac.DELETE_USER, user_arn(userId))
    ctx.services.auth.delete_user(userId)
    return Response(status_code=204)


@router.get("/users/{userId}/groups", response_model=GroupList, summary="list user groups")
def list_user_groups(userId: str, ctx: Annotated[Ctx, Depends(authenticated)],  # noqa: N803
                     prefix: PrefixQuery = "", after: AfterQuery = "",
                     amount: AmountQuery = 100) -> GroupList:
    ctx.check(rbac.READ_USER, user_arn(userId))
    groups, page = _page(
        lambda cur, n: ctx.services.auth.list_user_groups(userId, after=cur, amount=n),
        lambda g: g.name, prefix, after, amount)
    return GroupList(pagination=page, results=[_group(g) for g in groups])


# --- credentials --------------------------------------------------------------------------
@router.get("/users/{userId}/credentials", response_model=CredentialsList,
            summary="list user credentials")
def list_user_credentials(userId: str, ctx: Annotated[Ctx, Depends(authenticated)],  # noqa: N803
                          prefix: PrefixQuery = "", after: AfterQuery = "",
                          amount: AmountQuery = 100) -> CredentialsList:
    ctx.check(rbac.LIST_CREDENTIALS, user_arn(userId))
    creds, page = _page(
        lambda cur, n: ctx.services.auth.list_credentials(userId, after=cur, amount=n),
        lambda c: c.access_key_id, prefix, after, amount)
    return CredentialsList(pagination=page, results=[_credentials(c) for c in creds])


class ChosenCredentials(BaseModel):
    """The access key to create, when the caller chooses it (else generated)."""

    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None


@router.post("/users/{userId}/credentials", status_code=201,
             response_model=CredentialsWithSecret, summary="create credentials")
def create_credentials(
    userId: str,  # noqa: N803
    ctx: Annotated[Ctx, Depends(authenticated)],
    access_key_id: Annotated[str | None, Query(description="generated when absent")] = None,
    secret_access_key: Annotated[str | None, Query(
        include_in_schema=False,
        description="refused: a secret in a URL ends up in logs; send it in the body")] = None,
    chosen: Annotated[ChosenCredentials | None, Body()] = None,
) -> CredentialsWithSecret:
    """A new access key for the user; its secret is returned only now.

    Both parts are generated unless given: the key id in the query or the body, the
    secret only in the body (a secret in a URL would end up in access logs).
    """
    if secret_access_key is not None:
        raise ValidationError("secret_access_key must not be sent in the query string: "
                              "send it in the JSON body")
    ctx.check(rbac.CREATE_CREDENTIALS, user_arn(userId))
    key_id = (chosen.access_key_id if chosen is not None else None) or access_key_id
    secret = chosen.secret_access_key.get_secret_value() if chosen is not None and \
        chosen.secret_access_key is not None else None
    cred = ctx.services.auth.create_credentials(userId, key_id or None, secret or None)
    return CredentialsWithSecret(access_key_id=cred.access_key_id,
                                 secret_access_key=cred.secret,
                                 creation_date=_epoch(cred.creation_date))


@router.get("/users/{userId}/credentials/{accessKeyId}", response_model=Credentials,
            summary="get credentials")
def get_credentials(userId: str, accessKeyId: str,  # noqa: N803
                    ctx: Annotated[Ctx, Depends(authenticated)]) -> Credentials:
    ctx.check(rbac.READ_CREDENTIALS, user_arn(userId))
    ctx.services.auth.get_user(userId)
    cred = ctx.services.auth.get_credentials(accessKeyId)
    if cred.user != userId:
        raise NotFoundError(f"credentials not found: {accessKeyId}")
    return _credentials(cred)


@router.delete("/users/{userId}/credentials/{accessKeyId}", status_code=204,
               response_class=Response, summary="delete credentials")
def delete_credentials(userId: str, accessKeyId: str,  # noqa: N803
                       ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.DELETE_CREDENTIALS, user_arn(userId))
    ctx.services.auth.delete_credentials(userId, accessKeyId)
    return Response(status_code=204)


# --- groups -----------------------------------------------------------------------------
@router.get("/groups", response_model=GroupList, summary="list groups")
def list_groups(ctx: Annotated[Ctx, Depends(authenticated)], prefix: PrefixQuery = "",
                after: AfterQuery = "", amount: AmountQuery = 100) -> GroupList:
    ctx.check(rbac.LIST_GROUPS, _ALL)
    groups, page = _page(
        lambda cur, n: ctx.services.auth.list_groups(prefix=prefix, after=cur, amount=n),
        lambda g: g.name, prefix, after, amount)
    return GroupList(pagination=page, results=[_group(g) for g in groups])


@router.post("/groups", status_code=201, response_model=Group, summary="create group")
def create_group(group_creation: GroupCreation,
                 ctx: Annotated[Ctx, Depends(authenticated)]) -> Group:
    ctx.check(rbac.CREATE_GROUP, group_arn(group_creation.id))
    group = ctx.services.auth.create_group(group_creation.id,
                                           description=group_creation.description)
    return _group(group)


@router.get("/groups/{groupId}", response_model=Group, summary="get group")
def get_group(groupId: str, ctx: Annotated[Ctx, Depends(authenticated)]) -> Group:  # noqa: N803
    ctx.check(rbac.READ_GROUP, group_arn(groupId))
    return _group(ctx.services.auth.get_group(groupId))


@router.delete("/groups/{groupId}", status_code=204, response_class=Response,
               summary="delete group")
def delete_group(groupId: str, ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:  # noqa: N803
    ctx.check(rbac.DELETE_GROUP, group_arn(groupId))
    ctx.services.auth.delete_group(groupId)
    return Response(status_code=204)


@router.get("/groups/{groupId}/members", response_model=UserList, summary="list group members")
def list_group_members(groupId: str, ctx: Annotated[Ctx, Depends(authenticated)],  # noqa: N803
                       prefix: PrefixQuery = "", after: AfterQuery = "",
                       amount: AmountQuery = 100) -> UserList:
    ctx.check(rbac.READ_GROUP, group_arn(groupId))
    users, page = _page(
        lambda cur, n: ctx.services.auth.list_group_members(groupId, after=cur, amount=n),
        lambda u: u.username, prefix, after, amount)
    return UserList(pagination=page, results=[_user(u) for u in users])


@router.put("/groups/{groupId}/members/{userId}", status_code=201, response_class=Response,
            summary="add group membership")
def add_group_membership(groupId: str, userId: str,  # noqa: N803
                         ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.ADD_GROUP_MEMBER, group_arn(groupId))
    ctx.services.auth.add_user_to_group(userId, groupId)
    return Response(status_code=201)


@router.delete("/groups/{groupId}/members/{userId}", status_code=204, response_class=Response,
               summary="delete group membership")
def delete_group_membership(groupId: str, userId: str,  # noqa: N803
                            ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.REMOVE_GROUP_MEMBER, group_arn(groupId))
    ctx.services.auth.remove_user_from_group(userId, groupId)
    return Response(status_code=204)


# --- policies ---------------------------------------------------------------------------
@router.get("/policies", response_model=PolicyList, summary="list policies")
def list_policies(ctx: Annotated[Ctx, Depends(authenticated)], prefix: PrefixQuery = "",
                  after: AfterQuery = "", amount: AmountQuery = 100) -> PolicyList:
    ctx.check(rbac.LIST_POLICIES, _ALL)
    policies, page = _page(
        lambda cur, n: ctx.services.auth.list_policies(prefix=prefix, after=cur, amount=n),
        lambda p: p.name, prefix, after, amount)
    return PolicyList(pagination=page, results=[_policy(p) for p in policies])


@router.post("/policies", status_code=201, response_model=Policy, summary="create policy")
def create_policy(policy: Policy, ctx: Annotated[Ctx, Depends(authenticated)]) -> Policy:
    ctx.check(rbac.CREATE_POLICY, policy_arn(policy.id))
    return _policy(ctx.services.auth.create_policy(_policy_model(policy)))


@router.get("/policies/{policyId}", response_model=Policy, summary="get policy")
def get_policy(policyId: str, ctx: Annotated[Ctx, Depends(authenticated)]) -> Policy:  # noqa: N803
    ctx.check(rbac.READ_POLICY, policy_arn(policyId))
    return _policy(ctx.services.auth.get_policy(policyId))


@router.put("/policies/{policyId}", response_model=Policy, summary="update policy")
def update_policy(policyId: str, policy: Policy,  # noqa: N803
                  ctx: Annotated[Ctx, Depends(authenticated)]) -> Policy:
    ctx.check(rbac.UPDATE_POLICY, policy_arn(policyId))
    if policy.id != policyId:
        raise ValidationError(f"policy id {policy.id!r} does not match the path ({policyId!r})")
    return _policy(ctx.services.auth.update_policy(_policy_model(policy)))


@router.delete("/policies/{policyId}", status_code=204, response_class=Response,
               summary="delete policy")
def delete_policy(policyId: str, ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:  # noqa: N803
    ctx.check(rbac.DELETE_POLICY, policy_arn(policyId))
    ctx.services.auth.delete_policy(policyId)
    return Response(status_code=204)


@router.get("/users/{userId}/policies", response_model=PolicyList, summary="list user policies")
def list_user_policies(
    userId: str,  # noqa: N803
    ctx: Annotated[Ctx, Depends(authenticated)],
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    effective: Annotated[bool, Query(description="include policies of the user's groups")]
    = False,
) -> PolicyList:
    ctx.check(rbac.READ_USER, user_arn(userId))
    auth = ctx.services.auth
    found = auth.effective_policies(userId) if effective else auth.list_user_policies(userId)
    policies, page = _page_sorted(found, lambda p: p.name, prefix, after, amount)
    return PolicyList(pagination=page, results=[_policy(p) for p in policies])


@router.put("/users/{userId}/policies/{policyId}", status_code=201, response_class=Response,
            summary="attach policy to user")
def attach_policy_to_user(userId: str, policyId: str,  # noqa: N803
                          ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.ATTACH_POLICY, user_arn(userId))
    ctx.services.auth.attach_policy_to_user(userId, policyId)
    return Response(status_code=201)


@router.delete("/users/{userId}/policies/{policyId}", status_code=204, response_class=Response,
               summary="detach policy from user")
def detach_policy_from_user(userId: str, policyId: str,  # noqa: N803
                            ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.DETACH_POLICY, user_arn(userId))
    ctx.services.auth.detach_policy_from_user(userId, policyId)
    return Response(status_code=204)


@router.get("/groups/{groupId}/policies", response_model=PolicyList,
            summary="list group policies")
def list_group_policies(groupId: str, ctx: Annotated[Ctx, Depends(authenticated)],  # noqa: N803
                        prefix: PrefixQuery = "", after: AfterQuery = "",
                        amount: AmountQuery = 100) -> PolicyList:
    ctx.check(rbac.READ_GROUP, group_arn(groupId))
    found = ctx.services.auth.list_group_policies(groupId)
    policies, page = _page_sorted(found, lambda p: p.name, prefix, after, amount)
    return PolicyList(pagination=page, results=[_policy(p) for p in policies])


@router.put("/groups/{groupId}/policies/{policyId}", status_code=201, response_class=Response,
            summary="attach policy to group")
def attach_policy_to_group(groupId: str, policyId: str,  # noqa: N803
                           ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.ATTACH_POLICY, group_arn(groupId))
    ctx.services.auth.attach_policy_to_group(groupId, policyId)
    return Response(status_code=201)


@router.delete("/groups/{groupId}/policies/{policyId}", status_code=204,
               response_class=Response, summary="detach policy from group")
def detach_policy_from_group(groupId: str, policyId: str,  # noqa: N803
                             ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    ctx.check(rbac.DETACH_POLICY, group_arn(groupId))
    ctx.services.auth.detach_policy_from_group(groupId, policyId)
    return Response(status_code=204)


# --- group ACLs and capabilities ----------------------------------------------------------
class ACLModel(BaseModel):
    """lakeFS's ACL: a permission (Read, Write, Super, Admin) over repositories."""

    permission: str
    all_repositories: bool | None = None
    repositories: list[str] | None = None


class AuthCapabilities(BaseModel):
    invite_user: bool
    forgot_password: bool


@router.get("/groups/{groupId}/acl", response_model=ACLModel, response_model_exclude_none=True,
            summary="get ACL of group")
def get_group_acl(groupId: str, ctx: Annotated[Ctx, Depends(authenticated)]  # noqa: N803
                  ) -> ACLModel:
    ctx.check(rbac.READ_GROUP, group_arn(groupId))
    auth = ctx.services.auth
    auth.get_group(groupId)
    name = acl.policy_name(groupId)
    found = next((p for p in auth.list_group_policies(groupId) if p.name == name), None)
    granted = acl.from_policy(found) if found is not None else None
    if granted is None:
        raise NotFoundError(f"no ACL for group {groupId}")
    return ACLModel(permission=granted.permission, all_repositories=granted.all_repositories,
                    repositories=list(granted.repositories))


@router.post("/groups/{groupId}/acl", status_code=201, response_class=Response,
             summary="set ACL of group")
def set_group_acl(groupId: str, body: ACLModel,  # noqa: N803
                  ctx: Annotated[Ctx, Depends(authenticated)]) -> Response:
    name = acl.policy_name(groupId)
    ctx.check(rbac.ATTACH_POLICY, group_arn(groupId))
    ctx.check(rbac.UPDATE_POLICY, policy_arn(name))
    repositories = tuple(validate_repository_id(r) for r in body.repositories or ())
    granted = acl.ACL(body.permission,
                      all_repositories=(body.all_repositories
                                        if body.all_repositories is not None
                                        else not repositories),
                      repositories=repositories)
    auth = ctx.services.auth
    auth.get_group(groupId)
    policy = acl.to_policy(groupId, granted)
    try:
        auth.get_policy(name)
    except NotFoundError:
        auth.create_policy(policy, system=True)
    else:
        auth.update_policy(policy)
    if all(p.name != name for p in auth.list_group_policies(groupId)):
        auth.attach_policy_to_group(groupId, name)
    return Response(status_code=201)


@router.get("/capabilities", response_model=AuthCapabilities,
            summary="list authentication capabilities supported")
def get_auth_capabilities() -> AuthCapabilities:
    """No e-mail service: users are not invited and passwords are not reset by mail."""
    return AuthCapabilities(invite_user=False, forgot_password=False)
