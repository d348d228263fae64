"""The UI's session: the signed-in access key pair, in an encrypted, signed cookie.

The key pair is what the REST API and the replication service authenticate, so the
cookie carries it, sealed with Fernet (AES and an HMAC) under a key derived from
``auth.encrypt.secret_key``: the browser can neither read nor alter it. A session
lives at most :data:`SESSION_SECONDS`; a key deleted or a user removed ends it at the
next page, because every page authenticates the pair again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken

#: the session cookie's name
COOKIE = "lakefs_ui_session"
#: how long a session lasts (lakeFS's default login duration)
SESSION_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class Session:
    """Who is signed in: the access key pair, the user, and the session's form token."""

    access_key_id: str
    secret_access_key: str
    username: str
    #: sent back by every form of the session (a page elsewhere cannot know it)
    csrf: str


class SessionCodec:
    """Seals sessions into cookie values and opens them again."""

    def __init__(self, secret_key: str) -> None:
        derived = hmac.new(secret_key.encode(), b"lakefs-ui-session", hashlib.sha256).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))

    def new(self, access_key_id: str, secret_access_key: str, username: str) -> Session:
        return Session(access_key_id, secret_access_key, username, secrets.token_urlsafe(24))

    def seal(self, session: Session) -> str:
        body = json.dumps({"k": session.access_key_id, "s": session.secret_access_key,
                           "u": session.username, "c": session.csrf}).encode()
        return self._fernet.encrypt(body).decode()

    def open(self, value: str | None) -> Session | None:
        """The session of a cookie value; None if absent, forged or expired."""
        if not value:
            return None
        try:
            body = json.loads(self._fernet.decrypt(value.encode(), ttl=SESSION_SECONDS))
            return Session(str(body["k"]), str(body["s"]), str(body["u"]), str(body["c"]))
        except (InvalidToken, ValueError, KeyError, TypeError):
            return None
