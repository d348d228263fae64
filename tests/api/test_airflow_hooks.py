"""Airflow hooks against a small Airflow REST API on loopback (a stand-in for Airflow)."""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import lakefs
import pytest

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, sdk_client

_RUNS = re.compile(r"^/api/v1/dags/([^/]+)/dagRuns(?:/([^/]+))?$")


class AirflowAPI:
    """Airflow's ``dagRuns`` endpoints with basic auth ``admin``/``secret``.

    A run is ``queued``, then ``running`` at its first poll, then ends at the second:
    ``failed`` for the DAG ``breaks``, ``success`` for others. Unknown DAGs are 404.
    """

    DAGS = {"export_dag", "breaks"}

    def __init__(self) -> None:
        self.triggered: list[dict[str, Any]] = []
        self.polls: dict[str, int] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self) -> tuple[str, str | None] | None:
                auth = self.headers.get("Authorization", "")
                if auth != "Basic " + base64.b64encode(b"admin:secret").decode():
                    self._answer(401, {"title": "Unauthorized", "status": 401})
                    return None
                m = _RUNS.match(self.path)
                if m is None or m.group(1) not in api.DAGS:
                    self._answer(404, {"title": "DAG not found", "status": 404})
                    return None
                return m.group(1), m.group(2)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                route = self._route()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if route is None:
                    return
                api.triggered.append({"dag_id": route[0], **body})
                api.polls[body["dag_run_id"]] = 0
                self._answer(200, {"dag_id": route[0], "dag_run_id": body["dag_run_id"],
                                   "state": "queued", "conf": body["conf"]})

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                route = self._route()
                if route is None:
                    return
                dag_id, run_id = route
                if run_id not in api.polls:
                    self._answer(404, {"title": "DAGRun not found", "status": 404})
                    return
                api.polls[run_id] += 1
                n = api.polls[run_id]
                state = ("running" if n < 2 else "failed" if dag_id == "breaks"
                         else "success")
                self._answer(200, {"dag_id": dag_id, "dag_run_id": run_id, "state": state})

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def airflow() -> Iterator[AirflowAPI]:
    api = AirflowAPI()
    yield api
    api.close()


def _airflow_action(name: str, event: str, url: str, dag: str, wait: bool,
                    password: str = "secret") -> str:
    return f"""name: {name}
on:
  {event}:
    branches: [main]
hooks:
  - id: trigger_{dag}
    type: airflow
    description: Trigger {dag}
    properties:
      url: "{url}"
      dag_id: "{dag}"
      username: "admin"
      password: "{password}"
      dag_conf:
        some: "additional_conf"
      wait_for_dag: {str(wait).lower()}
      timeout: 5s
"""


def test_airflow_hook_triggers_and_waits_for_dag_runs(
        server: LiveServer, airflow: AirflowAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEFSACTION_AIRFLOW_TEST_SECRET", "secret")
    client = sdk_client(server)
    actions = client.sdk_client.actions_api
    repo = lakefs.Repository("flows", client=client).create(storage_namespace="local://flows")
    main = repo.branch("main")
    # a pre-commit hook that waits for a DAG run that fails refuses the commit
    put(main, "_lakefs_actions/gate.yaml",
        _airflow_action("gate", "pre-commit", airflow.url, "breaks", wait=True))
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        main.commit("gated")
    assert info.value.status_code == 412
    message = str(info.value)
    assert "trigger_breaks" in message
    assert re.search(r"airflow DAG run lakeFS_hook_\w+ failed", message)
    run = actions.list_repository_runs("flows").results[0]
    hook = actions.list_run_hooks("flows", run.run_id).results[0]
    assert airflow.triggered[-1]["dag_run_id"] == (
        f"lakeFS_hook_{run.run_id}_{hook.hook_run_id}")
    assert airflow.polls[airflow.triggered[-1]["dag_run_id"]] == 2

    # one that succeeds lets it through; a post-commit one only triggers, with the
    # password from the server's environment
    put(main, "_lakefs_actions/gate.yaml",
        _airflow_action("gate", "pre-commit", airflow.url, "export_dag", wait=True))
    put(main, "_lakefs_actions/notify.yaml",
        _airflow_action("notify", "post-commit", airflow.url, "export_dag", wait=False,
                        password="{{ ENV.LAKEFSACTION_AIRFLOW_TEST_SECRET }}"))
    commit = main.commit("gated, passing", metadata={"k": "v"}).get_commit().id
    gate, notify = airflow.triggered[-2:]
    assert airflow.polls[gate["dag_run_id"]] == 2
    assert airflow.polls[notify["dag_run_id"]] == 0
    assert notify["conf"]["some"] == "additional_conf"
    event = notify["conf"]["lakeFS_event"]
    assert (event["event_type"], event["action_name"], event["hook_id"]) == (
        "post-commit", "notify", "trigger_export_dag")
    assert event["commit_id"] == commit and event["commit_metadata"] == {"k": "v"}
    assert gate["conf"]["lakeFS_event"]["event_type"] == "pre-commit"

    # a wrong password (Airflow answers 401) fails the hook with the status
    put(main, "_lakefs_actions/gate.yaml",
        _airflow_action("gate", "pre-commit", airflow.url, "export_dag", wait=False,
                        password="wrong"))
    with pytest.raises(lakefs.exceptions.LakeFSException) as denied:
        main.commit("wrong password")
    assert denied.value.status_code == 412
    assert "airflow request failed (status code: 401)" in str(denied.value)


def test_airflow_hook_properties_are_checked(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("bad-flows", client=client).create(
        storage_namespace="local://bad-flows")
    main = repo.branch("main")
    put(main, "_lakefs_actions/gate.yaml",
        _airflow_action("gate", "pre-commit", "http://127.0.0.1:9", "d", wait=False)
        .replace('      dag_id: "d"\n', ""))
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        main.commit("gated")
    assert info.value.status_code == 412
    assert ("invalid action file _lakefs_actions/gate.yaml: hook 'trigger_d' "
            "properties.dag_id: missing dag_id") in str(info.value)
