"""Action runs through lakeFS's SDK: this server runs no hooks, so there are none."""

from __future__ import annotations

import lakefs
import pytest
from lakefs_sdk.exceptions import ApiException

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, sdk_client, viewer_client


def test_a_repository_has_no_action_runs(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("acts", client=client).create(storage_namespace="local://acts")
    put(repo.branch("main"), "_lakefs_actions/hook.yaml", "name: never run")
    commit = repo.branch("main").commit("an action that is not run").get_commit().id
    actions = client.sdk_client.actions_api
    runs = actions.list_repository_runs("acts", branch="main", commit=commit)
    assert runs.results == [] and runs.pagination.has_more is False
    for call in (lambda: actions.get_run("acts", "r1"),
                 lambda: actions.list_run_hooks("acts", "r1"),
                 lambda: actions.get_run_hook_output("acts", "r1", "h1"),
                 lambda: actions.list_repository_runs("no-such-repo")):
        with pytest.raises(ApiException) as info:
            call()
        assert info.value.status == 404
    with viewer_client(server) as viewer:  # Viewers have no ci:ReadAction
        assert viewer.get("/repositories/acts/actions/runs").status_code == 403
