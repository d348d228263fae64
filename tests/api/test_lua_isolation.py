"""A lua hook's ``lakefs`` calls act as the user who made the event (finding 5 of the
security review): what the committer may not do through the API, its hook may not do
either, and a refused call answers 403, never the data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client

from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import put, sdk_client

pytestmark = pytest.mark.timeout(120)

SPY = """name: spy
on:
  pre-commit:
    branches: [main]
hooks:
  - id: spy
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local repo = action.repository_id
        local code, body = lakefs.get_object(repo, "main", "secret/key")
        local listed = lakefs.list_objects(repo, "main")
        local tagged = lakefs.create_tag(repo, "main", "spied")
        local marked = lakefs.update_object_user_metadata(repo, "main", "public/page",
                                                          {spied = "yes"})
        require("hook").fail(string.format("read %s %s; list %s; tag %s; metadata %s",
                                           code, body, listed, tagged, marked))
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(str(tmp_path / "lua-users"), {"LAKEFS_ACTIONS_LUA_TIMEOUT": "10s"}) as s:
        yield s


def _restricted_user(admin: Client, repo: str) -> Client:
    """A user with full access but for reading secret/*, tagging and writing public/*."""
    auth = admin.sdk_client.auth_api
    auth.create_policy(lakefs_sdk.Policy(id="no-spying", statement=[
        lakefs_sdk.Statement(effect="deny", action=["fs:ReadObject"],
                             resource=f"arn:lakefs:fs:::repository/{repo}/object/secret/*"),
        lakefs_sdk.Statement(effect="deny", action=["fs:CreateTag"],
                             resource=f"arn:lakefs:fs:::repository/{repo}/tag/*"),
        lakefs_sdk.Statement(effect="deny", action=["fs:WriteObject"],
                             resource=f"arn:lakefs:fs:::repository/{repo}/object/public/*"),
    ]))
    auth.create_user(lakefs_sdk.UserCreation(id="restricted"))
    auth.attach_policy_to_user("restricted", "FSFullAccess")
    auth.attach_policy_to_user("restricted", "no-spying")
    key = auth.create_credentials("restricted")
    return Client(host=admin.config.host.removesuffix("/api/v1"),
                  username=key.access_key_id, password=key.secret_access_key)


def test_lakefs_calls_of_a_hook_need_the_committers_permissions(server: LiveServer) -> None:
    admin = sdk_client(server)
    repo = lakefs.Repository("guarded", client=admin).create(
        storage_namespace="local://guarded")
    main = repo.branch("main")
    put(main, "secret/key", "TOPSECRET")
    put(main, "public/page", "hello")
    main.commit("seed")
    put(main, "_lakefs_actions/spy.yaml", SPY)

    user = _restricted_user(admin, "guarded")
    user_main = lakefs.Repository("guarded", client=user).branch("main")
    put(user_main, "free/note", "mine")  # what the user may do
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        user_main.commit("the user's commit")
    assert info.value.status_code == 412
    message = str(info.value)
    assert "TOPSECRET" not in message
    assert 'read 403 {"message": "insufficient permissions"}' in message
    assert "list 200" in message  # what the user may do, the hook may do
    assert "tag 403" in message and "metadata 403" in message
    assert "spied" not in [t.id for t in repo.tags()]
    assert main.object("public/page").stat().metadata == {}

    # the same hook, committed by the admin, may do all of it
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        main.commit("the admin's commit")
    assert "read 200 TOPSECRET; list 200; tag 201; metadata 201" in str(info.value)
    assert "spied" in [t.id for t in repo.tags()]

    # and the server still runs hooks promptly
    put(main, "_lakefs_actions/spy.yaml", SPY.replace('require("hook").fail', "print"))
    main.commit("quiet spy")
