"""The UI's bounded bookkeeping: revoked sessions and failed sign-ins."""

from __future__ import annotations

import time

from lakefs_core.ui.session import RevokedSessions, SessionCodec
from lakefs_core.ui.throttle import LoginThrottle


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


def test_failed_sign_ins_are_limited_per_key_and_per_address() -> None:
    throttle = LoginThrottle(key_failures=2, address_failures=3, max_tracked=100)
    throttle.failed("AKIA1", "10.0.0.1")
    assert throttle.retry_after("AKIA1", "10.0.0.1") == 0
    throttle.failed("AKIA1", "10.0.0.2")
    assert 0 < throttle.retry_after("AKIA1", "10.0.0.9") <= throttle.window  # the key
    assert throttle.retry_after("AKIA2", "10.0.0.1") == 0
    throttle.failed("AKIA2", "10.0.0.1")
    throttle.failed("AKIA3", "10.0.0.1")
    assert throttle.retry_after("AKIA4", "10.0.0.1") > 0  # the address
    assert throttle.retry_after("AKIA4", "10.0.0.3") == 0


def test_failures_leave_the_window_and_memory_is_bounded() -> None:
    throttle = LoginThrottle(window=0.2, key_failures=1, address_failures=100, max_tracked=4)
    throttle.failed("AKIA1", "10.0.0.1")
    assert throttle.retry_after("AKIA1", "10.0.0.1") > 0
    time.sleep(0.25)
    assert throttle.retry_after("AKIA1", "10.0.0.1") == 0
    for i in range(10):
        throttle.failed(f"AKIA{i}", f"10.0.1.{i}")
    assert len(throttle._failures) <= 4
    assert throttle.retry_after("AKIA9", "x") > 0  # the most recent kept
