"""The UI's session: the signed-in access key pair, in an encrypted, signed cookie.

The key pair is what the REST API and the replication service authenticate, so the
cookie carries it, sealed with Fernet (AES and an HMAC) under a key derived from
``auth.encrypt.secret_key``: the browser can neither read nor alter it. A session
lives at most :data:`SESSION_SECONDS`; a key deleted or a user removed ends it at the
next page, because every page authenticates the pair again.

Signing out revokes the session on the server, so a copy of the cookie stops working
too: its id is recorded in the auth database until the session would have expired
(every replica of the server sees it), and in a bounded set in the process
(:class:`RevokedSessions`) that spares the database a look-up for ids known revoked.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from cryptography.fernet import Fernet, InvalidToken

#: the session cookie's name
COOKIE = "lakefs_ui_session"
#: the cookie of a browser's sign-in form: the login form's token is bound to it
LOGIN_COOKIE = "lakefs_ui_login"
#: how long a session lasts (lakeFS's default login duration)
SESSION_SECONDS = 7 * 24 * 3600
#: at most this many revoked sessions are remembered (see :class:`RevokedSessions`)
MAX_REVOKED = 100_000


@dataclass(frozen=True)
class Session:
    """Who is signed in: the access key pair, the user, and the session's form token."""

    access_key_id: str
    secret_access_key: str
    username: str
    #: sent back by every form of the session (a page elsewhere cannot know it)
    csrf: str
    #: the session's own id (what signing out revokes)
    id: str = ""
    #: when the session began (seconds since the epoch)
    issued: float = 0.0


class RevocationStore(Protocol):
    """Where revoked sessions are recorded for every server process (the auth store)."""

    def revoke_session(self, session_id: str, expires_at: datetime) -> None: ...

    def session_revoked(self, session_id: str) -> bool: ...


class RevokedSessions:
    """The ids of sessions signed out, until the sessions would have expired anyway.

    Kept in ``store`` when given (shared by every server process), and in memory,
    bounded: past ``limit`` ids, the oldest session's id is dropped and, without a
    store, every session begun no later than it counts as revoked (so a flood of
    sign-outs can end older sessions early, never revive one).
    """

    def __init__(self, limit: int = MAX_REVOKED, store: RevocationStore | None = None) -> None:
        self._store = store
        self._limit = limit
        self._ids: set[str] = set()
        self._by_issue: list[tuple[float, str]] = []  # a heap: the oldest session first
        self._floor = float("-inf")
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    def revoke(self, session: Session) -> None:
        if self._store is not None:
            self._store.revoke_session(session.id, datetime.fromtimestamp(
                session.issued + SESSION_SECONDS, UTC))
        with self._lock:
            if session.id in self._ids or session.issued <= self._floor:
                return
            self._ids.add(session.id)
            heapq.heappush(self._by_issue, (session.issued, session.id))
            expired = time.time() - SESSION_SECONDS
            while self._by_issue and (self._by_issue[0][0] < expired
                                      or len(self._ids) > self._limit):
                issued, sid = heapq.heappop(self._by_issue)
                self._ids.discard(sid)
                if issued >= expired and self._store is None:  # dropped before it
                    self._floor = max(self._floor, issued)  # expired: older sessions end

    def revoked(self, session: Session) -> bool:
        """Whether ``session`` was signed out (here, or in another server process)."""
        with self._lock:
            if session.issued <= self._floor or session.id in self._ids:
                return True
        return self._store is not None and self._store.session_revoked(session.id)


class SessionCodec:
    """Seals sessions into cookie values and opens them again."""

    def __init__(self, secret_key: str, revoked: RevokedSessions | None = None) -> None:
        derived = hmac.new(secret_key.encode(), b"lakefs-ui-session", hashlib.sha256).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))
        self._login_key = hmac.new(secret_key.encode(), b"lakefs-ui-login-form",
                                   hashlib.sha256).digest()
        self.revoked = RevokedSessions() if revoked is None else revoked

    def new(self, access_key_id: str, secret_access_key: str, username: str) -> Session:
        return Session(access_key_id, secret_access_key, username, secrets.token_urlsafe(24),
                       secrets.token_urlsafe(18), time.time())

    @staticmethod
    def login_nonce() -> str:
        """A new value of :data:`LOGIN_COOKIE`."""
        return secrets.token_urlsafe(24)

    def login_token(self, nonce: str) -> str:
        """The login form's token for the browser holding ``nonce`` in its cookie: a
        page of another site can neither read the cookie nor make the token, so it
        cannot sign a browser in (with the page's own key)."""
        return hmac.new(self._login_key, nonce.encode(), hashlib.sha256).hexdigest()

    def login_token_valid(self, nonce: str | None, token: str) -> bool:
        return bool(nonce) and hmac.compare_digest(self.login_token(nonce or "").encode(),
                                                   token.encode())

    def seal(self, session: Session) -> str:
        body = json.dumps({"k": session.access_key_id, "s": session.secret_access_key,
                           "u": session.username, "c": session.csrf, "i": session.id,
                           "t": session.issued}).encode()
        return self._fernet.encrypt(body).decode()

    def open(self, value: str | None) -> Session | None:
        """The session of a cookie value; None if absent, forged, expired or revoked
        (which may ask the database: call it from a worker thread)."""
        if not value:
            return None
        try:
            body = json.loads(self._fernet.decrypt(value.encode(), ttl=SESSION_SECONDS))
            session = Session(str(body["k"]), str(body["s"]), str(body["u"]), str(body["c"]),
                              str(body["i"]), float(body["t"]))
        except (InvalidToken, ValueError, KeyError, TypeError):
            return None
        if not session.id or self.revoked.revoked(session):
            return None
        return session

    def revoke(self, session: Session) -> None:
        """End ``session`` here: its cookie, and any copy of it, opens no more."""
        self.revoked.revoke(session)
