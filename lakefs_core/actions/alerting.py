"""Alerting on failed hooks: a Prometheus counter, and an optional alert webhook.

Every failed hook increments ``actions_hook_failures_total`` (labels: repository,
action, hook, event_type) in the server's registry, served at ``/metrics``; with
``actions.alert_webhook.url`` configured, it is also POSTed there as one JSON message
(see :func:`alert_message`), from a background thread so that a slow receiver never
holds up an operation. A delivery that fails is logged, not retried.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Counter

from lakefs_core.graveler.hooks import HookRecord

log = logging.getLogger("lakefs_core.actions.alerting")


@dataclass(frozen=True, slots=True)
class HookFailure:
    """One failed hook run."""

    record: HookRecord
    run_id: str
    hook_run_id: str
    action_name: str
    hook_id: str
    hook_type: str
    error: str


def alert_message(failure: HookFailure) -> dict[str, Any]:
    """The JSON the alert webhook receives (empty event fields left out)."""
    r = failure.record
    message: dict[str, Any] = {
        "alert": "hook_failed",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "repository_id": r.repository.id,
        "event_type": r.event_type.value,
        "branch_id": r.branch_id,
        "source_ref": r.source_ref,
        "tag_id": r.tag_id,
        "commit_id": r.commit_id,
        "run_id": failure.run_id,
        "hook_run_id": failure.hook_run_id,
        "action_name": failure.action_name,
        "hook_id": failure.hook_id,
        "hook_type": failure.hook_type,
        "error": failure.error,
        # a failed pre-event hook refused its operation; a post-event one did not
        "operation_refused": r.event_type.is_pre,
    }
    return {k: v for k, v in message.items() if v != ""}


class HookAlerts:
    """The counter and the alert webhook (see module doc)."""

    def __init__(self, alert_url: str | None = None, timeout: float = 5.0) -> None:
        self.registry = CollectorRegistry()
        self.failures = Counter(
            "actions_hook_failures", "Hook runs that failed",
            ("repository", "action", "hook", "event_type"), registry=self.registry)
        self.alert_url = alert_url
        self.timeout = timeout
        self._client = httpx.Client() if alert_url else None
        self._sender = ThreadPoolExecutor(1, thread_name_prefix="hook-alert") if (
            alert_url) else None

    def hook_failed(self, failure: HookFailure) -> None:
        self.failures.labels(failure.record.repository.id, failure.action_name,
                             failure.hook_id, failure.record.event_type.value).inc()
        if self._sender is not None:
            self._sender.submit(self._send, alert_message(failure))

    def _send(self, message: dict[str, Any]) -> None:
        assert self._client is not None and self.alert_url is not None
        try:
            resp = self._client.post(self.alert_url, json=message, timeout=self.timeout)
            resp.raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("hook failure alert not delivered", extra={
                "repository": message["repository_id"], "run_id": message["run_id"],
                "error": str(exc)})

    def close(self) -> None:
        if self._sender is not None:
            self._sender.shutdown(wait=True)
        if self._client is not None:
            self._client.close()
