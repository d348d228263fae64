"""The mirrors API refuses input it cannot act on, before any row is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakefs_testing.regions import MIRRORS, create_source, two_regions


@pytest.mark.parametrize("namespace", [
    "local://../../etc", "local:///etc", "local://a//b", "nothing", "local://a\tb",
])
def test_a_bad_mirror_namespace_is_400(tmp_path: Path, sqlite_mirrors: dict[str, Any],
                                       namespace: str) -> None:
    with two_regions(tmp_path, sqlite_mirrors, sidecars=True) as (east, _west):
        create_source(east)
        with east.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors", json={
                "name": "src-mirror", "region": "west", "storage_namespace": namespace})
            assert r.status_code == 400, r.text
            assert c.get(f"{MIRRORS}/src/mirrors").json()["results"] == []
