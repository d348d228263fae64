"""Authentication (basic auth with lakeFS access keys) and authorization helpers.

Route handlers take ``ctx: Ctx = Depends(authenticated)`` and call
``ctx.check(action, resource)`` (or ``ctx.check_all(...)``) before changing anything,
so a forbidden request changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass

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
_TOKEN_HEADER = {"alg": "HS256", "typ": "JWT"}


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


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
    claims = {"sub": username, "iat": issued, "exp": expires}
    signing_input = (_b64url(json.dumps(_TOKEN_HEADER, separators=(",", ":")).encode()) + "."
                     + _b64url(json.dumps(claims, separators=(",", ":")).encode()))
    signature = hmac.new(_token_key(services), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}", expires


def verify_token(services: Services, token: str, now: float | None = None) -> str:
    """The username a login token was issued to.

    Raises:
        AuthenticationError: A malformed, forged or expired token.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise AuthenticationError("malformed token")
    signing_input = f"{parts[0]}.{parts[1]}"
    expected = hmac.new(_token_key(services), signing_input.encode(), hashlib.sha256).digest()
    try:
        signature = _b64url_decode(parts[2])
        header = json.loads(_b64url_decode(parts[0]))
        claims = json.loads(_b64url_decode(parts[1]))
    except (binascii.Error, ValueError):
        raise AuthenticationError("malformed token") from None
    if not hmac.compare_digest(signature, expected) or header != _TOKEN_HEADER:
        raise AuthenticationError("invalid token")
    if not isinstance(claims, dict):
        raise AuthenticationError("malformed token")
    username, expires = claims.get("sub"), claims.get("exp")
    if not isinstance(username, str) or not isinstance(expires, int):
        raise AuthenticationError("malformed token")
    if expires <= (time.time() if now is None else now):
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
