"""Authentication (basic auth with lakeFS access keys) and authorization helpers.

Route handlers take ``ctx: Ctx = Depends(authenticated)`` and call
``ctx.check(action, resource)`` (or ``ctx.check_all(...)``) before changing anything,
so a forbidden request changes nothing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from fastapi import Request

from lakefs_core.auth import rbac
from lakefs_core.auth.model import User
from lakefs_core.errors import AuthenticationError
from lakefs_core.services import Services


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def repo_arn(repo: str) -> str:
    return f"arn:lakefs:fs:::repository/{repo}"


def branch_arn(repo: str, branch: str) -> str:
    return f"arn:lakefs:fs:::repository/{repo}/branch/{branch}"


def tag_arn(repo: str, tag: str) -> str:
    return f"arn:lakefs:fs:::repository/{repo}/tag/{tag}"


def object_arn(repo: str, path: str) -> str:
    return f"arn:lakefs:fs:::repository/{repo}/object/{path}"


def namespace_arn(namespace: str) -> str:
    return f"arn:lakefs:fs:::namespace/{namespace}"


def user_arn(user: str) -> str:
    return f"arn:lakefs:auth:::user/{user}"


def group_arn(group: str) -> str:
    return f"arn:lakefs:auth:::group/{group}"


def policy_arn(policy: str) -> str:
    return f"arn:lakefs:auth:::policy/{policy}"


@dataclass
class Ctx:
    """The services and the authenticated user of one request."""

    services: Services
    user: User

    def allowed(self, action: str, resource: str) -> bool:
        policies = self.services.auth.effective_policies(self.user.username)
        return rbac.authorize(policies, rbac.Permission(action, resource),
                              username=self.user.username)

    def check(self, action: str, resource: str) -> None:
        """Raise PermissionDeniedError (403) unless the user may do ``action``."""
        self.check_requirement(rbac.Permission(action, resource))

    def check_requirement(self, requirement: rbac.Requirement) -> None:
        policies = self.services.auth.effective_policies(self.user.username)
        rbac.check(policies, requirement, username=self.user.username)


def basic_credentials(request: Request) -> tuple[str, str] | None:
    header = request.headers.get("authorization", "")
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


def authenticated(request: Request) -> Ctx:
    """FastAPI dependency: the request's user, or 401."""
    services = services_of(request)
    creds = basic_credentials(request)
    if creds is None:
        raise AuthenticationError("error authenticating request")
    user = services.auth.authenticate(*creds)
    return Ctx(services=services, user=user)
