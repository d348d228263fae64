"""``lakectl import --from <object store URI> --to <lakeFS path URI>`` against a real
server that imports from a local directory: its summary, its progress and its errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from lakectl import lakectl as cli
from lakectl.commands import importing
from lakefs_testing.live_server import LiveServer, live_server
from tests.lakectl.test_live import DEATH, api, environment


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files outside the blockstore that the server may import."""
    root = tmp_path_factory.mktemp("external")
    for rel, data in {"raw/a.csv": b"a,1\n", "raw/b/c.csv": b"c,2\n",
                      "raw/d.json": b"{}"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED": "true",
           "LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": json.dumps([str(external)])}
    with live_server(str(tmp_path_factory.mktemp("lakectl-import")), env) as srv:
        srv.services.imports.progress_interval = 0.0
        assert api(srv, "POST", "/repositories", json={
            "name": "repo1", "storage_namespace": "local://repo1"}).status_code == 201
        yield srv


@pytest.fixture
def runner(server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr(importing, "POLL_INTERVAL", 0.05)
    return CliRunner(env=environment(server, tmp_path))


def test_import_commits_the_prefix(runner: CliRunner, server: LiveServer,
                                   external: Path) -> None:
    result = runner.invoke(cli, [
        "import", "--from", f"local://{external}/raw/", "--to",
        "lakefs://repo1/main/imported/", "-m", "load", "--meta", "job=7"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == 'Import of 3 object(s) into "main" completed.', result.stdout
    commit_id = next(line.split(": ", 1)[1] for line in lines if line.startswith("Commit ID"))
    commit = api(server, "GET", f"/repositories/repo1/commits/{commit_id}").json()
    assert commit["message"] == "load" and commit["metadata"]["job"] == "7"
    listing = api(server, "GET", "/repositories/repo1/refs/main/objects/ls",
                  params={"prefix": "imported/"}).json()
    assert sorted(o["path"] for o in listing["results"]) == [
        "imported/a.csv", "imported/b/c.csv", "imported/d.json"]
    assert api(server, "GET", "/repositories/repo1/refs/main/objects",
               params={"path": "imported/b/c.csv"}).content == b"c,2\n"
    assert "Importing" in result.stderr  # the progress line


@pytest.mark.parametrize(("source", "to", "message"), [
    ("s3://elsewhere/", "lakefs://repo1/main/", "import source 's3://elsewhere/' doesn't "
                                                "match current configured storage 'local'"),
    ("{external}/raw/", "lakefs://repo1/nobranch/", "Target branch 'nobranch', does not exists!"),
    ("{external}/none/", "lakefs://repo1/main/x/", "Import failed: "),
])
def test_import_failures(runner: CliRunner, external: Path, source: str, to: str,
                         message: str) -> None:
    source = source.replace("{external}", f"local://{external}")
    result = runner.invoke(cli, ["import", "--from", source, "--to", to, "--no-progress"])
    assert result.exit_code == 1, result.stdout
    assert result.stderr.startswith(message) and result.stderr.endswith(f"\n{DEATH}\n"), \
        result.stderr
