"""Ephemeral branches on a live server: the housekeeping deletes expired branches
through the ordinary delete, so the delete-branch hooks run (and may refuse)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import lakefs
import pytest

from lakefs_core.graveler.housekeeping import Outcome, delete_expired_branches
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.waiting import wait_for
from lakefs_testing.webhook import WebhookServer
from tests.api.sdk_support import put, sdk_client


def _delete_hooks(url: str) -> str:
    return f"""name: audit deletes
on:
  pre-delete-branch:
  post-delete-branch:
hooks:
  - id: tell
    type: webhook
    properties:
      url: "{url}"
"""


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookServer]:
    with WebhookServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"LAKEFS_BRANCHES_HOUSEKEEPING_INTERVAL": "200ms"}
    with live_server(str(tmp_path_factory.mktemp("ephemeral")), env) as s:
        yield s


def _branches(http: httpx.Client, repo: str) -> set[str]:
    page = http.get(f"/repositories/{repo}/branches").json()
    return {b["id"] for b in page["results"]}


def _create(http: httpx.Client, repo: str, name: str, **extra: object) -> httpx.Response:
    return http.post(f"/repositories/{repo}/branches",
                     json={"name": name, "source": "main", **extra})


def test_expired_branches_are_deleted_with_their_hooks(server: LiveServer,
                                                       webhook: WebhookServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("eph", client=client).create(storage_namespace="local://eph")
    main = repo.branch("main")
    put(main, "_lakefs_actions/audit.yaml", _delete_hooks(f"{webhook.url}/audit"))
    main.commit("audit deletes")
    now = int(time.time())
    with server.client() as http:
        assert http.put("/repositories/eph/settings/branch_protection",
                        json=[{"pattern": "keep-*"}]).status_code == 204
        # refused before the hooks run (for any branch name): an expiry must be positive
        refused = _create(http, "eph", "bad", expires_at=0)
        assert refused.status_code == 400 and "expires_at" in refused.text
        assert _create(http, "eph", "tmp-past", expires_at=now - 60).status_code == 201
        assert _create(http, "eph", "tmp-soon", expires_at=now + 2).status_code == 201
        assert _create(http, "eph", "keep-me", expires_at=now - 60).status_code == 201
        assert _create(http, "eph", "stay").status_code == 201
        # the branch's JSON shows its expiry (and none for other branches)
        shown = http.get("/repositories/eph/branches/tmp-soon").json()
        assert shown["expires_at"] == now + 2 and shown["id"] == "tmp-soon"
        assert "expires_at" not in http.get("/repositories/eph/branches/stay").json()
        # the default branch is never deleted, even with an expiry recorded on it
        server.services.refstore.set_branch_expiry("eph", "main", now - 60)

        wait_for(lambda: "tmp-past" not in _branches(http, "eph"), timeout=10,
                 what="the expired branch to be deleted")
        wait_for(lambda: "tmp-soon" not in _branches(http, "eph"), timeout=15,
                 what="the branch that expires soon to be deleted")
        assert time.time() >= now + 2
        assert {"main", "keep-me", "stay"} <= _branches(http, "eph")
    # a post-delete hook runs once the branch is gone: its call may come a little later
    wait_for(lambda: all(webhook.payloads(branch_id=name, event_type="post-delete-branch")
                         for name in ("tmp-past", "tmp-soon")),
             timeout=10, what="the post-delete hooks of both branches")
    for name in ("tmp-past", "tmp-soon"):
        events = [p["event_type"] for p in webhook.payloads(branch_id=name)]
        assert events == ["pre-delete-branch", "post-delete-branch"], name
    assert webhook.payloads(branch_id="keep-me") == []
    assert webhook.payloads(branch_id="main") == []
    runs = client.sdk_client.actions_api.list_repository_runs("eph", branch="tmp-past").results
    assert sorted((r.event_type, r.status) for r in runs) == [
        ("post-delete-branch", "completed"), ("pre-delete-branch", "completed")]


def test_a_refusing_pre_delete_hook_keeps_the_branch_until_it_passes(
        server: LiveServer, webhook: WebhookServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("eph-gate", client=client).create(
        storage_namespace="local://eph-gate")
    with server.client() as http:
        assert _create(http, "eph-gate", "gated").status_code == 201
        # the action files are read from the branch being deleted: this one refuses
        gated = repo.branch("gated")
        put(gated, "_lakefs_actions/audit.yaml", _delete_hooks(f"{webhook.url}/fail"))
        gated.commit("refuse deletes")
        server.services.refstore.set_branch_expiry("eph-gate", "gated", int(time.time()) - 1)
        wait_for(lambda: len(webhook.payloads(branch_id="gated",
                                              event_type="pre-delete-branch")) >= 2,
                 timeout=10, what="two refused rounds")
        assert "gated" in _branches(http, "eph-gate")
        runs = client.sdk_client.actions_api.list_repository_runs(
            "eph-gate", branch="gated").results
        assert runs and {r.status for r in runs} == {"failed"}
        assert webhook.payloads(branch_id="gated", event_type="post-delete-branch") == []

        # the rounds read the branch's staged action files too: no round until the
        # change is committed (post-delete reads the action files of its commit)
        server.services.refstore.set_branch_expiry("eph-gate", "gated", None)
        put(gated, "_lakefs_actions/audit.yaml", _delete_hooks(f"{webhook.url}/audit"))
        gated.commit("allow deletes")
        server.services.refstore.set_branch_expiry("eph-gate", "gated", int(time.time()) - 1)
        wait_for(lambda: "gated" not in _branches(http, "eph-gate"), timeout=10,
                 what="the branch to be deleted once its hook passes")
    # the post-delete hook runs once the branch is gone: its call may come a little later
    wait_for(lambda: webhook.payloads(branch_id="gated", event_type="post-delete-branch"),
             timeout=10, what="the post-delete hook")
    assert len(webhook.payloads(branch_id="gated", event_type="post-delete-branch")) == 1


def test_a_round_racing_another_finds_the_branch_gone(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # two server processes over one database run rounds at once: a branch that the
    # other deleted between listing and deleting is no error
    env = {"LAKEFS_BRANCHES_HOUSEKEEPING_INTERVAL": "0s"}  # no loop: rounds by hand
    with live_server(str(tmp_path / "race"), env) as server:
        assert server.services.housekeeper is None
        graveler = server.services.graveler
        with server.client() as http:
            assert http.post("/repositories", json={
                "name": "race", "storage_namespace": "local://race"}).status_code == 201
            assert _create(http, "race", "x", expires_at=1).status_code == 201
        listed = graveler.refstore.list_expired_branches(int(time.time()))
        assert listed == [("race", "x")]
        graveler.delete_branch("race", "x")  # the other process was first
        assert delete_expired_branches(graveler) == []
        # this round read its listing before the other process deleted the branch
        monkeypatch.setattr(graveler.refstore, "list_expired_branches",
                            lambda now, amount: listed)
        stale_round = delete_expired_branches(graveler)
        assert [(e.branch, e.outcome) for e in stale_round] == [("x", Outcome.GONE)]
