"""The limit on failed sign-ins shared by every door (lakefs_core.auth.throttle)."""

from __future__ import annotations

import time

import pytest

from lakefs_core.auth.throttle import SignInThrottle
from lakefs_core.errors import AuthenticationError, TooManySignInsError


def _refuse() -> None:
    raise AuthenticationError("wrong secret")


def test_a_guesser_waits_ever_longer_and_the_owner_elsewhere_never() -> None:
    throttle = SignInThrottle(free_pair=2, free_address=100, first_wait=10, max_wait=35)
    for _ in range(2):
        with pytest.raises(AuthenticationError):
            throttle.attempt("10.0.0.1", "AKIA1", _refuse)
    assert throttle.retry_after("10.0.0.1", "AKIA1") == 0  # the free failures
    with pytest.raises(AuthenticationError):
        throttle.attempt("10.0.0.1", "AKIA1", _refuse)
    assert 9 < throttle.retry_after("10.0.0.1", "AKIA1") <= 10
    # the right secret is not even asked for meanwhile
    with pytest.raises(TooManySignInsError) as refused:
        throttle.attempt("10.0.0.1", "AKIA1", lambda: "signed in")
    assert refused.value.retry_after == 10
    # the owner, from another address, and another key from the same one sign in
    assert throttle.attempt("10.0.0.2", "AKIA1", lambda: "owner") == "owner"
    assert throttle.attempt("10.0.0.1", "AKIA2", lambda: "other") == "other"
    throttle.failed("10.0.0.1", "AKIA1")
    assert 19 < throttle.retry_after("10.0.0.1", "AKIA1") <= 20  # twice as long
    for _ in range(5):
        throttle.failed("10.0.0.1", "AKIA1")
    assert throttle.retry_after("10.0.0.1", "AKIA1") <= 35  # bounded
    throttle.succeeded("10.0.0.1", "AKIA1")
    assert throttle.retry_after("10.0.0.1", "AKIA1") == 0


def test_an_address_trying_many_keys_waits_for_all_of_them() -> None:
    throttle = SignInThrottle(free_pair=100, free_address=3)
    for i in range(4):
        throttle.failed("10.0.0.1", f"AKIA{i}")
    assert throttle.retry_after("10.0.0.1", "AKIA-new") > 0
    assert throttle.retry_after("10.0.0.2", "AKIA-new") == 0


def test_failures_leave_the_window_and_memory_is_bounded() -> None:
    throttle = SignInThrottle(window=0.2, free_pair=0, free_address=100, max_tracked=4)
    throttle.failed("10.0.0.1", "AKIA1")
    assert throttle.retry_after("10.0.0.1", "AKIA1") > 0
    time.sleep(0.25)
    assert throttle.retry_after("10.0.0.1", "AKIA1") == 0
    for i in range(10):
        throttle.failed(f"10.0.1.{i}", f"AKIA{i}")
    assert len(throttle._failures) <= 4
    assert throttle.retry_after("10.0.1.9", "AKIA9") > 0  # the most recent kept
