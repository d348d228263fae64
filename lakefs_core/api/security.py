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
from lakefs_core.auth.service import AuthView, Principal, parse_basic_authorization
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
    #: the auth tables as the request found them (read on first need otherwise)
    view: AuthView | None = None
    _principal: Principal | None = None

    @property
    def principal(self) -> Principal:
        """The user with its effective policies (read once per request)."""
        if self._principal is None:
            if self.view is None:
                self.view = self.services.access.view()
            self._principal = self.view.principal(self.user.username)
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


def client_address(request: Request) -> str:
    """The address the request came from (what failed sign-ins are counted by)."""
    return request.client.host if request.client else ""


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


@dataclass(frozen=True)
class TokenClaims:
    """What a login token says: who, with which access key, until when."""

    username: str
    access_key_id: str
    #: the user's creation time (seconds): a user deleted and created again is another
    user_created: int
    expires: int


def issue_token(services: Services, username: str, now: float | None = None, *,
                access_key_id: str = "", user_created: int = 0) -> tuple[str, int]:
    """Sign a login token (a JWT with HS256) for ``username``.

    Args:
        access_key_id: the key the user logged in with; the token dies with it.
        user_created: the user's creation time; the token dies with the user.

    Returns:
        (token, expiry in seconds since the epoch)
    """
    issued = int(time.time() if now is None else now)
    expires = issued + LOGIN_DURATION_SECONDS
    token = jwt.encode({"sub": username, "iat": issued, "exp": expires, "key": access_key_id,
                        "ucd": user_created},
                       _token_key(services), algorithm=_TOKEN_ALGORITHM)
    return token, expires


def token_claims(services: Services, token: str, now: float | None = None) -> TokenClaims:
    """The claims of a login token this server signed, if it is still valid.

    Args:
        now: the time to check expiry against (seconds since the epoch); the clock by
            default.

    Raises:
        AuthenticationError: A malformed, forged or expired token, or one whose
            lifetime exceeds the login duration.
    """
    try:
        claims = jwt.decode(token, _token_key(services), algorithms=[_TOKEN_ALGORITHM],
                            options={"require": ["sub", "iat", "exp", "key", "ucd"],
                                     "verify_exp": now is None, "verify_iat": False})
    except jwt.ExpiredSignatureError:
        raise AuthenticationError("token expired") from None
    except jwt.DecodeError as e:
        if isinstance(e, jwt.InvalidSignatureError):
            raise AuthenticationError("invalid token") from None
        raise AuthenticationError("malformed token") from None
    except jwt.InvalidTokenError:
        raise AuthenticationError("invalid token") from None
    username, issued, expires = claims["sub"], claims["iat"], claims["exp"]
    key, user_created = claims["key"], claims["ucd"]
    if not (isinstance(username, str) and isinstance(key, str)
            and all(isinstance(v, int) for v in (issued, expires, user_created))):
        raise AuthenticationError("malformed token")
    if expires - issued > LOGIN_DURATION_SECONDS:
        raise AuthenticationError("invalid token: longer than the login duration")
    if now is not None and expires <= now:
        raise AuthenticationError("token expired")
    return TokenClaims(username, key, user_created, expires)


def verify_token(services: Services, token: str, now: float | None = None) -> str:
    """The username a login token was issued to (see :func:`token_claims`)."""
    return token_claims(services, token, now).username


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    if not value.strip():
        raise AuthenticationError("malformed bearer token")
    return value.strip()


#: where :class:`~lakefs_core.api.guard.BodyGuard` keeps the context of a request it
#: authenticated before reading its body (in the request's state)
CTX_STATE = "lakefs_ctx"


def basic_auth_ctx(services: Services, address: str, creds: tuple[str, str]) -> Ctx:
    """The context of a request from ``address`` with basic auth ``creds``: its user,
    and the auth tables as they are now (see :meth:`AuthService.view`).

    Raises:
        AuthenticationError: unknown key or wrong secret.
        TooManySignInsError: the key or the address failed too often of late.
    """
    view = services.access.view()
    user = services.sign_ins.attempt(address, creds[0], lambda: view.sign_in(*creds))
    return Ctx(services=services, user=user, view=view)


def authenticated(request: Request) -> Ctx:
    """FastAPI dependency: the request's user, or 401.

    Accepts basic auth with an access key, or ``Authorization: Bearer <token>`` with
    a token from ``POST /auth/login``.
    """
    known = request.scope.get("state", {}).get(CTX_STATE)
    if isinstance(known, Ctx):
        return known
    services = services_of(request)
    creds = basic_credentials(request)
    if creds is not None:
        return basic_auth_ctx(services, client_address(request), creds)
    token = bearer_token(request)
    if token is None:
        raise AuthenticationError("error authenticating request")
    claims = token_claims(services, token)
    try:
        user = services.auth.get_user(claims.username)
        key_owner = services.auth.get_credentials(claims.access_key_id).user
    except NotFoundError:  # the user or the key is gone: so is the token
        raise AuthenticationError("invalid token") from None
    if key_owner != user.username or int(user.creation_date.timestamp()) != claims.user_created:
        raise AuthenticationError("invalid token")
    return Ctx(services=services, user=user)
