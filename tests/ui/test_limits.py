"""The UI's bounded bookkeeping of revoked sessions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from lakefs_core.auth.store import AuthStore
from lakefs_core.ui.session import RevokedSessions, SessionCodec


def test_revoked_sessions_stay_revoked_past_the_bound() -> None:
    codec = SessionCodec("k" * 32, RevokedSessions(limit=3))
    sessions = [codec.new("AKIA", "secret", "user") for _ in range(5)]
    cookies = [codec.seal(s) for s in sessions]
    later = codec.new("AKIA", "secret", "user")
    for s in sessions:
        codec.revoke(s)
    assert len(codec.revoked) == 3
    assert all(codec.open(c) is None for c in cookies)  # the two dropped: by the floor
    opened = codec.open(codec.seal(later))
    assert opened is not None and opened.id == later.id


def test_a_sign_out_is_seen_by_every_process_sharing_the_auth_database(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'auth.db'}"
    with AuthStore(url, "k" * 32) as one, AuthStore(url, "k" * 32) as other:
        here = SessionCodec("k" * 32, RevokedSessions(limit=1, store=one))
        there = SessionCodec("k" * 32, RevokedSessions(store=other))
        kept = here.new("AKIA", "secret", "user")  # begun first, never signed out
        sessions = [here.new("AKIA", "secret", "user") for _ in range(3)]
        cookies = [here.seal(s) for s in sessions]
        for s in sessions:
            here.revoke(s)
        # the other process, and this one past its bound, read the database
        assert all(there.open(c) is None and here.open(c) is None for c in cookies)
        # the database holds every id: no session ends early for the bound's sake
        assert here.open(here.seal(kept)) is not None
        fresh = here.new("AKIA", "secret", "user")
        # rows of expired sessions are dropped at the next sign-out
        one.revoke_session("long-gone", datetime(2020, 1, 1, tzinfo=UTC))
        here.revoke(fresh)
        assert not one.session_revoked("long-gone") and one.session_revoked(fresh.id)

