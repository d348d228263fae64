"""Requests one region's replication API sends on to another's: a handover or a
deletion runs in the destination region of what it acts on, whichever region is asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel

from lakefs_core.errors import ValidationError

if TYPE_CHECKING:
    from replication.sidecar import Sidecar

PREFIX = "/service/replication/v1"
#: the header of a request forwarded by another region (never forwarded again)
FORWARDED = "x-replication-forwarded-from"


def forward(sidecar: Sidecar, region: str, request: Request, path: str,
            body: BaseModel | None = None, *, timeout: float = 3600) -> Response | None:
    """Send the request to ``path`` (with ``body``) of ``region``'s replication API, with
    the caller's credentials; None if it cannot be reached."""
    try:
        url = sidecar.config.endpoint_for(region).rstrip("/")
        resp = sidecar.http.request(
            request.method, f"{url}{path}",
            headers={"authorization": request.headers.get("authorization", ""),
                     "content-type": "application/json", FORWARDED: sidecar.region},
            content=body.model_dump_json() if body is not None else None,
            timeout=timeout)
    except (httpx.HTTPError, ValidationError):
        return None  # destination unreachable (disaster): record the request here
    if resp.status_code >= 500:
        return None
    return Response(content=resp.content, status_code=resp.status_code,
                    media_type=resp.headers.get("content-type"))
