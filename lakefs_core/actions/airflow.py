"""The ``airflow`` hook: trigger a DAG run through Airflow's REST API, as lakeFS does.

Properties as lakeFS reads them: ``url``, ``dag_id``, ``username`` and ``password``
(required; the password may be ``{{ ENV.NAME }}``, a variable ``actions.env`` lets
hooks see), ``dag_conf`` (passed on as the
run's ``conf``, with the event added as ``lakeFS_event``), ``wait_for_dag`` (wait for
the run to end and fail the hook unless it succeeded; default false) and ``timeout``
(a Go duration, default one minute, for each request and for the wait).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    Retrying,
    retry_if_result,
    stop_after_delay,
    wait_exponential,
)

from lakefs_core.actions.action import ActionHook
from lakefs_core.actions.destinations import DestinationDeniedError
from lakefs_core.actions.hook import (
    HookContext,
    HookFailedError,
    duration_property,
    property_error,
    secret,
)
from lakefs_core.actions.webhook import event_payload, read_bounded

DEFAULT_TIMEOUT = 60.0
#: Airflow's states of a DAG run that has ended
_ENDED = {"success", "failed"}


@dataclass(frozen=True, slots=True)
class AirflowHook:
    action_name: str
    hook_id: str
    url: str
    dag_id: str
    username: str
    password: str
    dag_conf: Mapping[str, Any]
    wait_for_dag: bool
    timeout: float

    @classmethod
    def from_hook(cls, action_name: str, path: str, hook: ActionHook) -> AirflowHook:
        """Raises InvalidActionError for malformed properties."""
        props = hook.properties
        values: dict[str, str] = {}
        for name in ("url", "dag_id", "username", "password"):
            value = props.get(name)
            if not isinstance(value, str) or not value:
                raise property_error(path, hook, f"{name}: missing {name}")
            values[name] = value
        dag_conf = props.get("dag_conf") or {}
        if not isinstance(dag_conf, dict):
            raise property_error(path, hook, "dag_conf: must be a mapping")
        wait = props.get("wait_for_dag", False)
        if not isinstance(wait, bool):
            raise property_error(path, hook, "wait_for_dag: must be true or false")
        return cls(action_name, hook.id, values["url"].rstrip("/"), values["dag_id"],
                   values["username"], values["password"], dag_conf, wait,
                   duration_property(path, hook, "timeout", DEFAULT_TIMEOUT))

    def run(self, ctx: HookContext) -> str:
        """Trigger the DAG run (and wait for it); the output. Raises HookFailedError."""
        out: list[str] = []
        try:
            password = secret(self.password, ctx.env)
        except HookFailedError as exc:
            raise HookFailedError(str(exc), "") from None
        auth = httpx.BasicAuth(self.username, password.value)
        dag_run_id = f"lakeFS_hook_{ctx.run_id}_{ctx.hook_run_id}"
        body = {"dag_run_id": dag_run_id,
                "conf": {**self.dag_conf,
                         "lakeFS_event": event_payload(self.action_name, self.hook_id,
                                                       ctx.record)}}
        runs_url = f"{self.url}/api/v1/dags/{self.dag_id}/dagRuns"
        out.append(f"POST {runs_url}\nRequest Body:\n{json.dumps(body)}\n")
        answer = self._request(ctx, "POST", runs_url, auth, out, json=body)
        if not self.wait_for_dag:
            return "".join(out)
        run_url = f"{runs_url}/{dag_run_id}"
        deadline = time.monotonic() + self.timeout

        def poll() -> str:
            remaining = max(deadline - time.monotonic(), 0.1)
            return _state(self._request(ctx, "GET", run_url, auth, out, timeout=remaining))

        state = _state(answer)
        if state not in _ENDED:
            state = Retrying(
                retry=retry_if_result(lambda s: s not in _ENDED),
                wait=wait_exponential(multiplier=0.05, max=2.0),
                stop=stop_after_delay(self.timeout),
                retry_error_callback=lambda rs: rs.outcome.result() if rs.outcome else "",
            )(poll)
        out.append(f"DAG run {dag_run_id} state: {state or 'unknown'}\n")
        if state == "success":
            return "".join(out)
        if state in _ENDED:
            raise HookFailedError(f"airflow DAG run {dag_run_id} {state}", "".join(out))
        raise HookFailedError(
            f"airflow DAG run {dag_run_id} did not end within {self.timeout:g}s "
            f"(state: {state or 'unknown'})", "".join(out))

    def _request(self, ctx: HookContext, method: str, url: str, auth: httpx.BasicAuth,
                 out: list[str], *, timeout: float | None = None, **kwargs: Any
                 ) -> str:
        """The answer's body. Raises HookFailedError unless it is a 2xx."""
        try:
            request = ctx.destinations.request(
                ctx.client, method, url,
                timeout=timeout if timeout is not None else self.timeout, **kwargs)
            resp = ctx.client.send(request, auth=auth, stream=True)
            try:
                text = read_bounded(resp)
            finally:
                resp.close()
        except DestinationDeniedError as exc:
            raise HookFailedError(f"airflow request failed: {exc}", "".join(out)) from None
        except httpx.HTTPError as exc:
            raise HookFailedError(f"airflow request failed: {exc}", "".join(out)) from None
        out.append(f"{method} {url}: {resp.status_code} {resp.reason_phrase}\n{text}\n")
        if not 200 <= resp.status_code < 300:
            raise HookFailedError(
                f"airflow request failed (status code: {resp.status_code})", "".join(out))
        return text


def _state(body: str) -> str:
    """The ``state`` of a DAG run as Airflow answered it ("" when it did not say)."""
    try:
        value = json.loads(body)
    except ValueError:
        return ""
    return str(value.get("state", "")) if isinstance(value, dict) else ""
