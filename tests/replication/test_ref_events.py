"""Ref events wake mirrors early; only the region's server and the sidecars may send them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from lakefs_core import ref_events
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import SECRET_KEY, two_regions

EVENTS = ref_events.EVENTS_PATH


def test_ref_events_are_authenticated_and_bounded(tmp_path: Path,
                                                  sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors) as (_east, west):
        body = json.dumps({"events": [{"repository": "src", "refs": ["main"]}]}).encode()
        signed = ref_events.sign_events(ref_events.events_key(SECRET_KEY), body)
        for base in (west.sidecars[0].url, west.server.endpoint):  # direct, and proxied
            with httpx.Client(base_url=base, timeout=10) as c:
                def post(content: bytes, **headers: str) -> httpx.Response:
                    return c.post(EVENTS, content=content,
                                  headers={"content-type": "application/json", **headers})

                assert post(body).status_code == 401  # anyone: no
                assert post(body, **{ref_events.SIGNATURE_HEADER: "0" * 64}).status_code == 401
                assert post(body + b" ",  # a signature is over the exact body
                            **{ref_events.SIGNATURE_HEADER: signed}).status_code == 401
                assert post(body, **{ref_events.SIGNATURE_HEADER: signed}).status_code == 202
                # the sidecars share the replication user's key (the admin's in this harness)
                wrong = httpx.BasicAuth(ADMIN_KEY, "not-the-secret")
                assert c.post(EVENTS, content=body, auth=wrong).status_code == 401
                ok = c.post(EVENTS, content=body, auth=(ADMIN_KEY, ADMIN_SECRET))
                assert ok.status_code == 202 and "woken" in ok.json()
                # bounded: a body past the limit is refused before it is read whole
                huge = b"x" * (ref_events.MAX_EVENTS_BODY + 1)
                assert c.post(EVENTS, content=huge,
                              auth=(ADMIN_KEY, ADMIN_SECRET)).status_code == 413
                many = json.dumps({"events": [{"repository": f"r{i}"} for i in range(101)]})
                r = c.post(EVENTS, content=many.encode(), auth=(ADMIN_KEY, ADMIN_SECRET))
                assert r.status_code == 400, r.text
