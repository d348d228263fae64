"""What hooks may read of the server's environment and where they may send requests:
``actions.env`` and ``actions.webhook``, against a live server and a real receiver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lakefs
import pytest

from lakefs_core.actions import HookDestinations, networks
from lakefs_core.actions.destinations import DestinationDeniedError
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.webhook import WebhookServer
from tests.api.sdk_support import put, sdk_client

SERVER_SECRET = "LAKEFS_AUTH_ENCRYPT_SECRET_KEY"


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    with WebhookServer(refusal=b"r" * 300_000) as srv:
        yield srv


def _webhook_action(url: str, header: str = "", param: str = "") -> str:
    return f"""name: leak
on:
  pre-commit:
hooks:
  - id: send
    type: webhook
    properties:
      url: "{url}"
      timeout: 5s
      query_params:
        p: "{param or 'plain'}"
      headers:
        x-leak: "{header or 'plain'}"
"""


def _airflow_action(url: str, password: str) -> str:
    return f"""name: dag
on:
  pre-commit:
hooks:
  - id: trigger
    type: airflow
    properties:
      url: "{url}"
      dag_id: d
      username: u
      password: "{password}"
"""


def _refused_commit(branch: lakefs.Branch, message: str) -> str:
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        branch.commit(message)
    assert info.value.status_code == 412
    return str(info.value)


def _branch(server: LiveServer, name: str) -> lakefs.Branch:
    repo = lakefs.Repository(name, client=sdk_client(server)).create(
        storage_namespace=f"local://{name}")
    return repo.branch("main")


def test_hooks_read_only_prefixed_variables(server: LiveServer, webhook: WebhookServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVER_SECRET, "the-servers-own-key")
    monkeypatch.setenv("LAKEFSACTION_TOKEN", "hook-token")
    main = _branch(server, "envs")
    # the server's own settings are out of reach, in headers, query params and Airflow
    # passwords alike, and the refusal does not say whether the variable exists
    for action in (_webhook_action(f"{webhook.url}/h", header=f"{{{{ ENV.{SERVER_SECRET} }}}}"),
                   _webhook_action(f"{webhook.url}/q", param=f"{{{{ ENV.{SERVER_SECRET} }}}}"),
                   _airflow_action(webhook.url, f"{{{{ ENV.{SERVER_SECRET} }}}}")):
        put(main, "_lakefs_actions/leak.yaml", action)
        message = _refused_commit(main, "leak")
        assert f"env var {SERVER_SECRET} is not available to hooks" in message
        assert "LAKEFSACTION_" in message and "the-servers-own-key" not in message
    assert webhook.calls == []
    # a variable with the prefix is read, and masked in the run's output
    put(main, "_lakefs_actions/leak.yaml",
        _webhook_action(f"{webhook.url}/ok", header="{{ ENV.LAKEFSACTION_TOKEN }}"))
    main.commit("allowed")
    assert webhook.calls[-1]["headers"]["x-leak"] == "hook-token"
    runs = sdk_client(server).sdk_client.actions_api
    run = runs.list_repository_runs("envs").results[0]
    hook = runs.list_run_hooks("envs", run.run_id).results[0]
    output = runs.get_run_hook_output("envs", run.run_id, hook.hook_run_id)
    text = output.decode() if isinstance(output, bytes) else str(output)
    assert "x-leak: *****" in text and "hook-token" not in text


def test_actions_env_can_be_turned_off(tmp_path: Path, webhook: WebhookServer,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEFSACTION_TOKEN", "hook-token")
    with live_server(str(tmp_path / "srv"), {"LAKEFS_ACTIONS_ENV_ENABLED": "false"}) as srv:
        main = _branch(srv, "noenv")
        put(main, "_lakefs_actions/leak.yaml",
            _webhook_action(f"{webhook.url}/ok", header="{{ ENV.LAKEFSACTION_TOKEN }}"))
        assert "actions.env.enabled is false" in _refused_commit(main, "no env")
    assert webhook.calls == []


def test_webhooks_never_reach_instance_metadata(server: LiveServer) -> None:
    main = _branch(server, "meta")
    for url in ("http://169.254.169.254/latest/meta-data/",
                "http://[fd00:ec2::254]/latest/meta-data/"):
        put(main, "_lakefs_actions/leak.yaml", _webhook_action(url))
        message = _refused_commit(main, "metadata")
        assert "are not allowed (actions.webhook)" in message


def test_deny_private_keeps_hooks_off_the_servers_network(
        tmp_path: Path, webhook: WebhookServer) -> None:
    env = {"LAKEFS_ACTIONS_WEBHOOK_DENY_PRIVATE": "true"}
    with live_server(str(tmp_path / "srv"), env) as srv:
        main = _branch(srv, "private")
        for url in (f"{webhook.url}/ok", f"http://localhost:{srv.port}/api/v1/healthcheck"):
            put(main, "_lakefs_actions/leak.yaml", _webhook_action(url))
            assert "are not allowed (actions.webhook)" in _refused_commit(main, "private")
    assert webhook.calls == []


def test_a_failing_hooks_answer_is_kept_bounded(server: LiveServer,
                                                webhook: WebhookServer) -> None:
    main = _branch(server, "bounded")
    put(main, "_lakefs_actions/leak.yaml", _webhook_action(f"{webhook.url}/fail"))
    message = _refused_commit(main, "big answer")
    assert "status code: 500" in message and len(message) < 5_000
    runs = sdk_client(server).sdk_client.actions_api
    run = runs.list_repository_runs("bounded").results[0]
    hook = runs.list_run_hooks("bounded", run.run_id).results[0]
    output = runs.get_run_hook_output("bounded", run.run_id, hook.hook_run_id)
    text = output.decode() if isinstance(output, bytes) else str(output)
    assert "[response body cut at 65536 bytes]" in text and len(text) < 80_000


def test_a_name_is_sent_to_the_address_that_was_checked() -> None:
    dest = HookDestinations(networks(["169.254.0.0/16"]), deny_private=False)
    url, headers, extensions = dest.pin("https://localhost:8443/hook?x=1")
    assert url in ("https://127.0.0.1:8443/hook?x=1", "https://[::1]:8443/hook?x=1")
    assert headers == {"Host": "localhost:8443"}
    assert extensions == {"sni_hostname": "localhost"}
    # mapped IPv4 addresses are the addresses they map
    with pytest.raises(DestinationDeniedError):
        dest.pin("http://[::ffff:169.254.169.254]/")
    with pytest.raises(DestinationDeniedError):
        HookDestinations(deny_private=True).pin("http://127.0.0.2:9/")
    with pytest.raises(DestinationDeniedError, match="only http and https"):
        dest.pin("file:///etc/passwd")
