"""``lakectl import`` on lakeFS's import API shape (the server here does not serve it yet):
its requests, its polling and its summary, against a scripted transport."""

from __future__ import annotations

import functools
import json
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import lakectl.session
from lakectl import lakectl as cli
from lakectl.commands import importing
from lakefs_core.client import RestClient

COMMIT = {"id": "c0ffee", "message": "Import objects", "creation_date": 1700000000,
          "parents": ["p1"], "metadata": {}, "committer": "admin", "meta_range_id": "mr"}


class ImportServer:
    """lakeFS's import endpoints, answering a scripted sequence of statuses."""

    def __init__(self, statuses: list[dict[str, Any]], branch_exists: bool = True) -> None:
        self.statuses = statuses
        self.branch_exists = branch_exists
        self.started: dict[str, Any] | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/config":
            return httpx.Response(200, json={"storage_config": {
                "blockstore_type": "s3", "import_validity_regex": "^s3://"}})
        if path == "/api/v1/repositories/repo1/branches/main":
            if self.branch_exists:
                return httpx.Response(200, json={"id": "main", "commit_id": "p1"})
            return httpx.Response(404, json={"message": "branch not found"})
        if path == "/api/v1/repositories/repo1/branches/main/import":
            if request.method == "POST":
                self.started = json.loads(request.content)
                return httpx.Response(202, json={"id": "import-1"})
            assert request.url.params["id"] == "import-1"
            return httpx.Response(200, json=self.statuses.pop(0))
        return httpx.Response(404, json={"message": f"no route {path}"})


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(server: ImportServer) -> CliRunner:
        monkeypatch.setattr(lakectl.session, "RestClient",
                            functools.partial(RestClient, transport=httpx.MockTransport(server)))
        monkeypatch.setattr(importing, "POLL_INTERVAL", 0.0)
        return CliRunner(env={"LAKECTL_SERVER_ENDPOINT_URL": "http://lakefs.invalid",
                              "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "AK",
                              "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "SK",
                              "HOME": "/nonexistent"})
    return install


def test_import_polls_until_the_commit(scripted: Any) -> None:
    server = ImportServer([
        {"completed": False, "ingested_objects": 4, "update_time": "t1"},
        {"completed": True, "ingested_objects": 9, "update_time": "t2", "metarange_id": "mr",
         "commit": COMMIT}])
    result = scripted(server).invoke(cli, [
        "import", "--from", "s3://bucket/raw/", "--to", "lakefs://repo1/main/imported/",
        "-m", "load", "--meta", "job=7"])
    assert result.exit_code == 0, result.stderr
    assert server.started == {
        "paths": [{"path": "s3://bucket/raw/", "destination": "imported/",
                   "type": "common_prefix"}],
        "commit": {"message": "load", "metadata": {"job": "7"}}}
    assert result.stdout.startswith('Import of 9 object(s) into "main" completed.\n'
                                    "MetaRange ID: mr\nCommit ID: c0ffee\n")
    assert "Importing 9 objects" in result.stderr


@pytest.mark.parametrize(("source", "exists", "statuses", "message"), [
    ("gs://elsewhere/", True, [], "import source 'gs://elsewhere/' doesn't match current "
                                  "configured storage 's3'"),
    ("s3://bucket/", False, [], "Target branch 'main', does not exists!"),
    ("s3://bucket/", True, [{"completed": False, "error": {"message": "access denied"}}],
     "Import failed: access denied"),
])
def test_import_failures(scripted: Any, source: str, exists: bool,
                         statuses: list[dict[str, Any]], message: str) -> None:
    result = scripted(ImportServer(statuses, exists)).invoke(
        cli, ["import", "--from", source, "--to", "lakefs://repo1/main/", "--no-progress"])
    assert result.exit_code == 1
    assert result.stderr == f"{message}\nError executing command.\n"
