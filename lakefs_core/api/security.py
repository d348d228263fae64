"""Authentication (basic auth with lakeFS access keys) and authorization helpers.

Route handlers take ``ctx: Ctx = Depends(authenticated)`` and call
``ctx.check(action, resource)`` (or ``ctx.check_all(...)``) before changing anything,
so a forbidden request changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import jwt
from fastapi import Request

from lakefs_core.auth import rbac
from lakefs_core.auth.model import User
from lakefs_core.auth.service import Principal, parse_basic_authorization
from lakefs_core.errors import AuthenticationError, NotFoundError
from lakefs_core.services import Services


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


# ARN builders (one definition, in the RBAC module)
repo_arn = rbac.repository_arn
branch_arn = rbac.branch_arn
tag_arn = rbac.tag_arn
object_arn = rbac.object_arn
namespace_arn = rbac.storage_namespace_arn
user_arn = rbac.user_arn
group_arn = rbac.group_arn
policy_arn = rbac.policy_arn


@dataclass
class Ctx:
    """The services and the authenticated user of one request."""

    services: Services
    user: User
    _principal: Principal | None = None

    @property
    def principal(self) -> Principal:
        """The user with its effective policies (read once per request)."""
        if self._principal is None:
            self._principal = self.services.access.principal(self.user.username)
        return self._principal

    def allowed(self, action: str, resource: str) -> bool:
        return self.principal.allowed(rbac.Permission(action, resource))

    def check(self, action: str, resource: str) -> None:
        """Raise PermissionDeniedError (403) unless the user may do ``action``."""
        self.check_requirement(rbac.Permission(action, resource))

    def check_requirement(self, requirement: rbac.Requirement) -> None:
        self.principal.check(requirement)


def basic_credentials(request: Request) -> tuple[str, str] | None:
    """The access key pair of a basic auth header; None without one."""
    return parse_basic_authorization(request.headers.get("authorization", ""))


#: how long a login token is valid (lakeFS's default ``auth.login_duration``)
LOGIN_DURATION_SECONDS = 7 * 24 * 3600
_TOKEN_ALGORITHM = "HS256"


def _token_key(services: Services) -> bytes:
    """The signing key of login tokens, derived from ``auth.encrypt.secret_key``.

    Derived rather than used as is, so that tokens and encrypted secrets never share
    a key.
    """
    secret = services.config.auth.encrypt.secret_key
    if secret is None:  # the config model fills the embedded default
        raise AuthenticationError("login tokens need auth.encrypt.secret_key")
    return hmac.new(secret.get_secret_value().encode(), b"lakefs-login-token",
                    hashlib.sha256).digest()


def issue_token(services: Services, username: str, now: float | None = None) -> tuple[str, int]:
    """Sign a login token (a JWT with HS256) for ``username``.

    Returns:
        (token, expiry in seconds since the epoch)
    """
    issued = int(time.time() if now is None else now)
    expires = issued + LOGIN_DURATION_SECONDS
    token = jwt.encode({"sub": username, "iat": issued, "exp": expires}, _token_key(services),
                       algorithm=_TOKEN_ALGORITHM)
    return token, expires


def verify_token(services: Services, token: str, now: float | None = None) -> str:
    """The username a login token was issued to.

    Args:
        now: the time to check expiry against (seconds since the epoch); the clock by
            default.

    Raises:
        AuthenticationError: A malformed, forged or expired token.
    """
    try:
        claims = jwt.decode(token, _token_key(services), algorithms=[_TOKEN_ALGORITHM],
                            options={"require": ["sub", "iat", "exp"],
                                     "verify_exp": now is None, "verify_iat": False})
    except jwt.ExpiredSignatureError:
        raise AuthenticationError("token expired") from None
    except jwt.DecodeError as e:
        if isinstance(e, jwt.InvalidSignatureError):
            raise AuthenticationError("invalid token") from None
        raise AuthenticationError("malformed token") from None
    except jwt.InvalidTokenError:
        raise AuthenticationError("invalid token") from None
    username, expires = claims.get("sub"), claims.get("exp")
    if not isinstance(username, str) or not isinstance(expires, int):
        raise AuthenticationError("malformed token")
    if now is not None and expires <= now:
        raise AuthenticationError("token expired")
    return username


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    if not value.strip():
        raise AuthenticationError("malformed bearer token")
    return value.strip()


def authenticated(request: Request) -> Ctx:
    """FastAPI dependency: the request's user, or 401.

    Accepts basic auth with an access key, or ``Authorization: Bearer <token>`` with
    a token from ``POST /auth/login``.
    """
    services = services_of(request)
    creds = basic_credentials(request)
    if creds is not None:
        return Ctx(services=services, user=services.auth.authenticate(*creds))
    token = bearer_token(request)
    if token is None:
        raise AuthenticationError("error authenticating request")
    username = verify_token(services, token)
    try:
        user = services.auth.get_user(username)
    except NotFoundError:
        raise AuthenticationError("invalid token") from None
    return Ctx(services=services, user=user)
