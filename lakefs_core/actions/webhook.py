"""The ``webhook`` hook: POST the event as lakeFS's JSON payload, pass on a 2xx.

Properties as lakeFS reads them: ``url`` (required), ``timeout`` (a Go duration,
default one minute), ``query_params`` (a value or a list of values per name) and
``headers``; the last two may use ``{{ ENV.NAME }}`` for a variable of the server's
environment that ``actions.env`` lets hooks see, shown masked in the run's output. The
request goes only where ``actions.webhook`` allows (see
:mod:`lakefs_core.actions.destinations`); at most 64 KiB of the answer is kept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from lakefs_core.actions.action import ActionHook, InvalidActionError
from lakefs_core.actions.destinations import DestinationDeniedError
from lakefs_core.actions.hook import (
    HookContext,
    HookFailedError,
    duration_property,
    secret,
)
from lakefs_core.graveler.hooks import HookRecord

DEFAULT_TIMEOUT = 60.0
#: how much of a hook's response body is kept in the run's output
MAX_RESPONSE_BODY = 64 << 10


def read_bounded(resp: httpx.Response, limit: int = MAX_RESPONSE_BODY) -> str:
    """At most ``limit`` bytes of a streamed response's body, as text (marked when cut)."""
    data = bytearray()
    for chunk in resp.iter_bytes():
        data += chunk
        if len(data) > limit:
            return (data[:limit].decode("utf-8", "replace")
                    + f"\n[response body cut at {limit} bytes]")
    return data.decode(resp.encoding or "utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Webhook:
    action_name: str
    hook_id: str
    url: str
    timeout: float
    query_params: Mapping[str, tuple[str, ...]]
    headers: Mapping[str, str]

    @classmethod
    def from_hook(cls, action_name: str, path: str, hook: ActionHook) -> Webhook:
        """Raises InvalidActionError for malformed properties."""
        props = hook.properties

        def bad(what: str) -> InvalidActionError:
            return InvalidActionError(
                f"invalid action file {path}: hook '{hook.id}' properties.{what}")

        url = props.get("url")
        if not isinstance(url, str) or not url:
            raise bad("url: missing url")
        timeout = duration_property(path, hook, "timeout", DEFAULT_TIMEOUT)
        params: dict[str, tuple[str, ...]] = {}
        raw_params = props.get("query_params") or {}
        if not isinstance(raw_params, dict):
            raise bad("query_params: unsupported query params")
        for k, v in raw_params.items():
            values = v if isinstance(v, list) else [v]
            if not all(isinstance(x, str) for x in values):
                raise bad(f"query_params.{k}: values must be strings")
            params[str(k)] = tuple(values)
        raw_headers = props.get("headers") or {}
        if not isinstance(raw_headers, dict) or not all(
                isinstance(v, str) for v in raw_headers.values()):
            raise bad("headers: values must be strings")
        return cls(action_name, hook.id, url, timeout, params,
                   {str(k): v for k, v in raw_headers.items()})

    def run(self, ctx: HookContext) -> str:
        """POST the event; the run's output. Raises HookFailedError (output attached)."""
        record, client = ctx.record, ctx.client
        out: list[str] = []
        body = json.dumps(event_payload(self.action_name, self.hook_id, record))
        out.append(f"Request:\nPOST {self.url}\nQuery Params:\n")
        query: list[tuple[str, str | int | float | bool | None]] = []
        try:
            for k, values in self.query_params.items():
                for v in values:
                    s = secret(v, ctx.env)
                    query.append((k, s.value))
                    out.append(f"{k}: {s}\n")
            out.append("Headers:\n")
            headers = {"Content-Type": "application/json"}
            for k, v in self.headers.items():
                s = secret(v, ctx.env)
                headers[k] = s.value
                out.append(f"{k}: {s}\n")
        except HookFailedError as exc:
            raise HookFailedError(str(exc), "".join(out)) from None
        out.append(f"Request Body:\n{body}\n\n")
        start = time.monotonic()
        try:
            request = ctx.destinations.request(client, "POST", self.url, params=query,
                                               headers=headers, content=body,
                                               timeout=self.timeout)
            resp = client.send(request, stream=True)
            try:
                text = read_bounded(resp)
            finally:
                resp.close()
        except DestinationDeniedError as exc:
            raise HookFailedError(f"webhook request failed: {exc}", "".join(out)) from None
        except httpx.HTTPError as exc:
            out.append(f"\nRequest duration: {time.monotonic() - start:.3f}s\n")
            raise HookFailedError(f"webhook request failed: {exc}", "".join(out)) from None
        out.append(f"\nRequest duration: {time.monotonic() - start:.3f}s\n")
        out.append(f"\nResponse:\n{resp.http_version} {resp.status_code} "
                   f"{resp.reason_phrase}\n")
        out.extend(f"{k}: {v}\n" for k, v in resp.headers.items())
        out.append(f"\n{text}")
        if not 200 <= resp.status_code < 300:
            raise HookFailedError(
                f"webhook request failed (status code: {resp.status_code})", "".join(out))
        return "".join(out)


def event_payload(action_name: str, hook_id: str, record: HookRecord) -> dict[str, Any]:
    """lakeFS's event information (empty ``source_ref``, ``tag_id``, ``commit_id`` and
    ``commit_metadata`` left out, as lakeFS does)."""
    payload: dict[str, Any] = {
        "event_type": record.event_type.value,
        "event_time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "action_name": action_name,
        "hook_id": hook_id,
        "repository_id": record.repository.id,
        "branch_id": record.branch_id,
    }
    if record.source_ref:
        payload["source_ref"] = record.source_ref
    if record.tag_id:
        payload["tag_id"] = record.tag_id
    if record.commit_id:
        payload["commit_id"] = record.commit_id
    payload["commit_message"] = record.commit_message
    payload["committer"] = record.committer
    if record.commit_metadata:
        payload["commit_metadata"] = dict(record.commit_metadata)
    return payload
