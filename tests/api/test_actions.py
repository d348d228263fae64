"""Actions and hooks through lakeFS's SDK, against a real webhook server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest
from lakefs_sdk.exceptions import ApiException

from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.waiting import wait_for
from lakefs_testing.webhook import WebhookServer
from tests.api.sdk_support import put, sdk_client, viewer_client


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    srv = WebhookServer()
    yield srv
    srv.close()


def _action(name: str, event: str, url: str, branches: str = "[main]") -> str:
    return f"""name: {name}
description: a gate
on:
  {event}:
    branches: {branches}
hooks:
  - id: check_{event.replace('-', '_')}
    type: webhook
    description: posts the event
    properties:
      url: "{url}"
      timeout: 5s
      query_params:
        team: [data, ops]
      headers:
        X-Gate: yes-please
"""


def test_pre_commit_gate_post_merge_payload_and_runs(server: LiveServer,
                                                     webhook: WebhookServer) -> None:
    client = sdk_client(server)
    actions = client.sdk_client.actions_api
    repo = lakefs.Repository("acts", client=client).create(storage_namespace="local://acts")
    main = repo.branch("main")
    # a failing pre-commit hook, read from the branch's staged action file, blocks it
    put(main, "_lakefs_actions/gate.yaml",
        _action("gate", "pre-commit", f"{webhook.url}/fail"))
    head = main.get_commit().id
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        main.commit("blocked")
    assert info.value.status_code == 412
    assert "pre-commit hook aborted" in str(info.value)
    assert "schema check failed: column x" in str(info.value)
    assert main.get_commit().id == head  # nothing committed
    call = webhook.calls[-1]
    assert call["path"] == "/fail?team=data&team=ops"
    assert call["headers"]["X-Gate"] == "yes-please"
    assert call["payload"]["event_type"] == "pre-commit"
    assert call["payload"]["branch_id"] == "main"
    assert call["payload"]["commit_message"] == "blocked"
    failed = actions.list_repository_runs("acts", branch="main").results
    assert [r.status for r in failed] == ["failed"]
    hooks = actions.list_run_hooks("acts", failed[0].run_id).results
    assert [(h.hook_id, h.action, h.status) for h in hooks] == [
        ("check_pre_commit", "gate", "failed")]
    output = actions.get_run_hook_output("acts", failed[0].run_id, hooks[0].hook_run_id)
    text = output.decode() if isinstance(output, bytes) else str(output)
    assert "POST " in text and "500" in text and "schema check failed" in text

    # a passing one lets it through; a post-merge hook gets lakeFS's payload
    put(main, "_lakefs_actions/gate.yaml", _action("gate", "pre-commit", f"{webhook.url}/ok"))
    put(main, "_lakefs_actions/notify.yaml",
        _action("notify", "post-merge", f"{webhook.url}/merged"))
    ref = main.commit("gates in place", metadata={"team": "data"})
    committed = ref.get_commit().id
    feature = repo.branch("feature").create(source_reference="main")
    put(feature, "data/a.csv", "a,b\n1,2\n")
    feature.commit("data", metadata={"k": "v"})
    merge_id = feature.merge_into(main, message="bring data")
    merged = [c for c in webhook.calls if c["path"].startswith("/merged")]
    assert len(merged) == 1
    payload = merged[0]["payload"]
    assert payload["event_type"] == "post-merge"
    assert payload["action_name"] == "notify"
    assert payload["hook_id"] == "check_post_merge"
    assert payload["repository_id"] == "acts"
    assert payload["branch_id"] == "main"
    assert payload["commit_id"] == merge_id == payload["source_ref"]
    assert payload["commit_message"] == "bring data"
    assert payload["committer"] == "admin"
    assert payload["commit_metadata"][".lakefs.merge.strategy"] == "default"
    assert payload["event_time"].endswith("Z")

    runs = actions.list_repository_runs("acts", branch="main").results
    assert [r.event_type for r in runs] == ["post-merge", "pre-commit", "pre-commit"]
    assert [r.status for r in runs] == ["completed", "completed", "failed"]
    # the passing pre-commit run learnt its commit; filter by commit finds it
    by_commit = actions.list_repository_runs("acts", commit=committed).results
    assert [(r.event_type, r.commit_id) for r in by_commit] == [("pre-commit", committed)]
    assert actions.get_run("acts", runs[0].run_id).commit_id == merge_id

    for call_ in (lambda: actions.get_run("acts", "r1"),
                  lambda: actions.list_run_hooks("acts", "r1"),
                  lambda: actions.get_run_hook_output("acts", runs[0].run_id, "h1"),
                  lambda: actions.list_repository_runs("no-such-repo")):
        with pytest.raises(ApiException) as api_info:
            call_()
        assert api_info.value.status == 404
    with viewer_client(server) as viewer:  # Viewers have no ci:ReadAction
        assert viewer.get("/repositories/acts/actions/runs").status_code == 403


def test_invalid_action_file_fails_the_gated_operation(server: LiveServer,
                                                       webhook: WebhookServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("bad-acts", client=client).create(
        storage_namespace="local://bad-acts")
    main = repo.branch("main")
    put(main, "_lakefs_actions/broken.yaml",
        _action("broken", "pre-commit", webhook.url).replace("pre-commit:", "pre-comit:"))
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        main.commit("gated by a broken file")
    assert info.value.status_code == 412
    assert "_lakefs_actions/broken.yaml" in str(info.value)
    assert "'on': event 'pre-comit' is not supported" in str(info.value)
    assert webhook.calls == []
    # branch events are gated by the action files of their source ref
    put(main, "_lakefs_actions/broken.yaml",
        _action("tag-gate", "pre-create-branch", f"{webhook.url}/fail", branches="[dev*]"))
    main.commit("a branch gate")
    repo.branch("other").create(source_reference="main")  # no match: created
    with pytest.raises(lakefs.exceptions.LakeFSException) as branch_info:
        repo.branch("dev-1").create(source_reference="main")
    assert branch_info.value.status_code == 412
    names = [b.id for b in repo.branches()]
    assert "other" in names and "dev-1" not in names
    assert webhook.calls[-1]["payload"]["branch_id"] == "dev-1"


def test_tag_and_delete_branch_events(server: LiveServer, webhook: WebhookServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("tag-acts", client=client).create(
        storage_namespace="local://tag-acts")
    main = repo.branch("main")
    put(main, "_lakefs_actions/tags.yaml", f"""name: tags
on:
  pre-create-tag:
  post-create-tag:
hooks:
  - id: tag_check
    type: webhook
    properties:
      url: "{webhook.url}/ok"
""")
    put(main, "_lakefs_actions/keep.yaml",
        _action("keep", "pre-delete-branch", f"{webhook.url}/fail", branches="[keep*]"))
    head = main.commit("tag and branch gates").get_commit().id
    repo.tag("v1").create(head)
    tag_calls = [c["payload"] for c in webhook.calls if c["path"].startswith("/ok")]
    assert [c["event_type"] for c in tag_calls] == ["pre-create-tag", "post-create-tag"]
    assert all(c["tag_id"] == "v1" and c["commit_id"] == head for c in tag_calls)
    repo.branch("keep-me").create(source_reference="main")
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        repo.branch("keep-me").delete()
    assert info.value.status_code == 412
    assert "keep-me" in [b.id for b in repo.branches()]
    assert webhook.calls[-1]["payload"]["event_type"] == "pre-delete-branch"
    repo.branch("other").create(source_reference="main")
    repo.branch("other").delete()  # no match: deleted
    assert "other" not in [b.id for b in repo.branches()]


def test_prepare_commit_revert_and_cherry_pick_events(server: LiveServer,
                                                      webhook: WebhookServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("pick-acts", client=client).create(
        storage_namespace="local://pick-acts")
    main = repo.branch("main")
    put(main, "_lakefs_actions/all.yaml", f"""name: every change
on:
  prepare-commit:
  pre-revert:
  post-revert:
  pre-cherry-pick:
  post-cherry-pick:
hooks:
  - id: record
    type: webhook
    properties:
      url: "{webhook.url}/ok"
""")
    put(main, "_lakefs_actions/no_picks.yaml",
        _action("no-picks", "pre-cherry-pick", f"{webhook.url}/fail", branches="[locked]"))
    main.commit("actions")
    prepare = webhook.calls[-1]["payload"]
    assert (prepare["event_type"], prepare["commit_message"]) == ("prepare-commit", "actions")
    put(main, "data/a.csv", "1\n")
    added = main.commit("add a").get_commit().id
    webhook.calls.clear()
    reverted = main.revert(added).id
    events = [c["payload"] for c in webhook.calls]
    assert [e["event_type"] for e in events] == ["pre-revert", "post-revert"]
    assert events[0]["source_ref"] == "main" and "commit_id" not in events[0]
    assert events[1]["commit_id"] == reverted == events[1]["source_ref"]
    assert all(e["commit_message"] == f"Revert {added}" for e in events)

    locked = repo.branch("locked").create(source_reference=reverted)
    feature = repo.branch("feature").create(source_reference=reverted)
    webhook.calls.clear()
    picked = feature.cherry_pick(added).id
    events = [c["payload"] for c in webhook.calls]
    assert [e["event_type"] for e in events] == ["pre-cherry-pick", "post-cherry-pick"]
    assert events[1]["commit_id"] == picked and events[1]["branch_id"] == "feature"
    assert events[1]["commit_metadata"]["cherry-pick-origin"] == added
    # a failing pre-cherry-pick hook refuses it and the branch stays where it was
    head = locked.get_commit().id
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        locked.cherry_pick(added)
    assert info.value.status_code == 412
    assert "pre-cherry-pick hook aborted" in str(info.value)
    assert locked.get_commit().id == head


def test_failed_hooks_are_counted_and_alerted(tmp_path: Path,
                                              webhook: WebhookServer) -> None:
    env = {"LAKEFS_ACTIONS_ALERT_WEBHOOK_URL": f"{webhook.url}/alerts"}
    with live_server(str(tmp_path / "alerting"), env) as server:
        client = sdk_client(server)
        repo = lakefs.Repository("alerted", client=client).create(
            storage_namespace="local://alerted")
        main = repo.branch("main")
        put(main, "_lakefs_actions/gate.yaml",
            _action("gate", "pre-commit", f"{webhook.url}/fail"))
        for _ in range(2):
            with pytest.raises(lakefs.exceptions.LakeFSException):
                main.commit("refused")
        put(main, "_lakefs_actions/gate.yaml", """name: after
on:
  post-commit:
hooks:
  - id: broken_export
    type: lua
    properties:
      script: error("export target unreachable")
""")
        commit = main.commit("stands").get_commit().id

        def alerts() -> list[dict[str, Any]]:
            return [c["payload"] for c in webhook.calls if c["path"] == "/alerts"]

        wait_for(lambda: len(alerts()) == 3, timeout=10, what="three alerts")
        first, _, post = alerts()
        assert first["alert"] == "hook_failed"
        assert (first["repository_id"], first["action_name"], first["hook_id"],
                first["hook_type"], first["event_type"], first["branch_id"]) == (
            "alerted", "gate", "check_pre_commit", "webhook", "pre-commit", "main")
        assert first["operation_refused"] is True
        assert "status code: 500" in first["error"]
        runs = client.sdk_client.actions_api.list_repository_runs("alerted").results
        assert first["run_id"] == runs[-1].run_id and first["hook_run_id"] == "0000_0000"
        assert (post["event_type"], post["commit_id"], post["hook_type"],
                post["operation_refused"]) == ("post-commit", commit, "lua", False)
        assert "export target unreachable" in post["error"]

        metrics = httpx.get(f"{server.endpoint}/metrics").text
        assert ('actions_hook_failures_total{action="gate",event_type="pre-commit",'
                'hook="check_pre_commit",repository="alerted"} 2.0') in metrics
        assert ('actions_hook_failures_total{action="after",event_type="post-commit",'
                'hook="broken_export",repository="alerted"} 1.0') in metrics
