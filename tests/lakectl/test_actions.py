"""``lakectl actions runs list|describe`` against a real server whose actions call a real
webhook on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import lakefs
import pytest
from click.testing import CliRunner

from lakectl import lakectl
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.webhook import WebhookServer
from tests.api.sdk_support import sdk_client
from tests.api.test_actions import _action
from tests.lakectl.test_live import DEATH, environment


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-actions"))) as srv:
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def test_runs_list_and_describe(server: LiveServer, cli: CliRunner) -> None:
    hook = WebhookServer()
    try:
        repo = lakefs.Repository("acts", client=sdk_client(server)).create(
            storage_namespace="local://acts")
        main = repo.branch("main")
        main.object("_lakefs_actions/gate.yaml").upload(
            _action("gate", "pre-commit", f"{hook.url}/ok"))
        commit_id = main.commit("with a gate").get_commit().id
    finally:
        hook.close()
    listed = cli.invoke(lakectl, ["actions", "runs", "list", "lakefs://acts"])
    assert listed.exit_code == 0, listed.stderr
    (row,) = [line.split("\t") for line in listed.stdout.splitlines()]
    run_id = row[0]
    assert row[1] == "pre-commit" and row[4] == "main" and row[5] == commit_id
    assert row[6] == "completed"
    by_commit = cli.invoke(lakectl, ["actions", "runs", "list", "lakefs://acts", "--commit",
                                     commit_id, "-o", "json"])
    assert [r["run_id"] for r in json.loads(by_commit.stdout)["results"]] == [run_id]
    described = cli.invoke(lakectl, ["actions", "runs", "describe", "lakefs://acts", run_id])
    assert described.exit_code == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == "Repository: lakefs://acts"
    assert lines[1].split("\t")[0] == run_id and lines[1].split("\t")[-1] == "completed"
    hook_row = lines[2].split("\t")
    assert hook_row[1] == "check_pre_commit" and hook_row[4] == "gate"
    assert f"{hook.url}/ok" in described.stdout  # the hook's output: its request
    both = cli.invoke(lakectl, ["actions", "runs", "list", "lakefs://acts", "--branch", "main",
                                "--commit", commit_id])
    assert both.exit_code == 1
    assert both.stderr == f"Can't specify 'commit' and 'branch'\n{DEATH}\n"
    missing = cli.invoke(lakectl, ["actions", "runs", "describe", "lakefs://acts", "nope"])
    assert missing.exit_code == 1 and missing.stderr.endswith(f"\n{DEATH}\n")


def test_cat_hook_output(server: LiveServer, cli: CliRunner) -> None:
    hook = WebhookServer()
    try:
        repo = lakefs.Repository("hooked", client=sdk_client(server)).create(
            storage_namespace="local://hooked")
        main = repo.branch("main")
        main.object("_lakefs_actions/gate.yaml").upload(
            _action("gate", "pre-commit", f"{hook.url}/ok"))
        main.commit("with a gate")
    finally:
        hook.close()
    runs = json.loads(cli.invoke(lakectl, ["actions", "runs", "list", "lakefs://hooked",
                                           "-o", "json"]).stdout)["results"]
    run_id = runs[0]["run_id"]
    base = f"/repositories/hooked/actions/runs/{run_id}/hooks"
    with server.client() as c:
        (hook_run,) = c.get(base).json()["results"]
        hook_run_id = hook_run["hook_run_id"]
        expected = c.get(f"{base}/{hook_run_id}/output").content
    result = cli.invoke(lakectl, ["cat-hook-output", "lakefs://hooked", run_id,
                                  hook_run_id])
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes == expected and f"{hook.url}/ok".encode() in expected
    missing = cli.invoke(lakectl, ["cat-hook-output", "lakefs://hooked", run_id, "nope"])
    assert missing.exit_code == 1 and missing.stderr.endswith(f"\n{DEATH}\n")
    usage = cli.invoke(lakectl, ["cat-hook-output", "lakefs://hooked", run_id])
    assert usage.exit_code == 1
