"""Helpers of the tests of the sidecar's settings: a region's config, changed before
its sidecar starts; waiting for something, or seeing that it does not happen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import yaml

from lakefs_testing.regions import Region


def configure(region: Region, **changes: Any) -> None:
    """Set fields of the region's replication config (sections are merged)."""
    config: dict[str, Any] = yaml.safe_load(region.config_path.read_text())
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    region.config_path.write_text(yaml.safe_dump(config))


def stays_false(predicate: Callable[[], object], seconds: float,
                interval: float = 0.05) -> bool:
    """True if ``predicate()`` stays falsy for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return False
        time.sleep(interval)
    return not predicate()
