"""Waiting for a condition, with invariants checked on every poll."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition", check: Callable[[], None] | None = None,
             state: Callable[[], Any] | None = None) -> Any:
    """Poll until ``predicate()`` is truthy, running ``check()`` (invariants) each time.

    On a timeout the error says ``state()`` too, when given: what was seen instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; state: {state()!r}" if state is not None else ""
            raise AssertionError(f"timed out waiting for {what}{seen}")
        time.sleep(interval)
