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


def test_ingest_stages_objects_by_their_addresses(runner: CliRunner, server: LiveServer,
                                                  external: Path) -> None:
    api(server, "POST", "/repositories/repo1/branches",
        json={"name": "ingested", "source": "main"})
    dry = runner.invoke(cli, ["ingest", "--from", f"local://{external}/raw/", "--to",
                              "lakefs://repo1/ingested/in", "--dry-run"])
    assert dry.exit_code == 0, dry.stderr
    assert [line.split("RelativeKey:")[1].split(",")[0] for line in dry.stdout.splitlines()
            ] == ["a.csv", "b/c.csv", "d.json"]
    result = runner.invoke(cli, ["ingest", "--from", f"local://{external}/raw/", "--to",
                                 "lakefs://repo1/ingested/in"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith("\nStaged 3 external objects (total of 10 B)\n")
    changes = api(server, "GET", "/repositories/repo1/branches/ingested/diff").json()
    assert sorted((c["path"], c["type"]) for c in changes["results"]) == [
        ("in/a.csv", "added"), ("in/b/c.csv", "added"), ("in/d.json", "added")]
    assert api(server, "GET", "/repositories/repo1/refs/ingested/objects",
               params={"path": "in/b/c.csv"}).content == b"c,2\n"
    stat = api(server, "GET", "/repositories/repo1/refs/ingested/objects/stat",
               params={"path": "in/a.csv"}).json()
    assert stat["physical_address"] == f"local://{external}/raw/a.csv"
    verbose = runner.invoke(cli, ["ingest", "--from", f"local://{external}/raw/d.json",
                                  "--to", "lakefs://repo1/ingested/", "-v"])
    assert verbose.exit_code == 0, verbose.stderr
    assert verbose.stdout.startswith("Staged Path: d.json\n")
    unknown = runner.invoke(cli, ["ingest", "--from", "gopher://x/", "--to",
                                  "lakefs://repo1/ingested/"])
    assert unknown.exit_code == 1
    assert unknown.stderr == ("error walking object store: no storage adapter found for: "
                              f"gopher\n{DEATH}\n")


def test_fs_stage_links_an_outside_object(runner: CliRunner, server: LiveServer,
                                          external: Path) -> None:
    address = f"local://{external}/raw/a.csv"
    result = runner.invoke(cli, ["fs", "stage", "lakefs://repo1/main/staged/a.csv",
                                 "--location", address, "--size", "4", "--checksum", "abc",
                                 "--meta", "k=v"])
    assert result.exit_code == 0, result.stderr
    assert "Physical Address: " + address in result.stdout
    stat = api(server, "GET", "/repositories/repo1/refs/main/objects/stat",
               params={"path": "staged/a.csv"}).json()
    assert (stat["checksum"], stat["metadata"]) == ("abc", {"k": "v"})
    assert api(server, "GET", "/repositories/repo1/refs/main/objects",
               params={"path": "staged/a.csv"}).content == b"a,1\n"
    refused = runner.invoke(cli, ["fs", "stage", "lakefs://repo1/main/x", "--location",
                                  "local://repo1/data/x", "--size", "1", "--checksum", "c"])
    assert refused.exit_code == 1
    assert refused.stderr.startswith("The staged object must be outside the repository's "
                                     "storage namespace\n")


@pytest.mark.parametrize(("address", "size", "status", "message"), [
    ("{external}/raw/a.csv", 5, 400, "size mismatch: 5 declared, 4 at"),
    ("{external}/raw/none.csv", 1, 400, "no object at physical address"),
    ("/etc/hostname", 1, 403, "/etc/hostname is not under blockstore.local.path"),
    ("s3://bucket/key", 1, 400, "import path 's3://bucket/key' does not fit the local"),
])
def test_stage_object_outside_namespace_refusals(server: LiveServer, external: Path,
                                                 address: str, size: int, status: int,
                                                 message: str) -> None:
    address = address.replace("{external}", f"local://{external}")
    if address.startswith("/"):
        address = "local://" + address
    resp = api(server, "PUT", "/repositories/repo1/branches/main/objects",
               params={"path": "refused"},
               json={"physical_address": address, "checksum": "c", "size_bytes": size})
    assert resp.status_code == status, resp.text
    assert resp.json()["message"].startswith(message), resp.json()


def test_stage_object_outside_namespace_needs_import_permission(
        server: LiveServer, external: Path) -> None:
    assert api(server, "POST", "/auth/users", json={"id": "stager"}).status_code == 201
    assert api(server, "POST", "/auth/policies", json={
        "id": "write-only", "statement": [{
            "effect": "allow", "action": ["fs:WriteObject", "fs:Read*"],
            "resource": "*"}]}).status_code == 201
    api(server, "PUT", "/auth/users/stager/policies/write-only")
    key = api(server, "POST", "/auth/users/stager/credentials").json()
    with server.client(key["access_key_id"], key["secret_access_key"]) as c:
        resp = c.put("/repositories/repo1/branches/main/objects", params={"path": "p"},
                     json={"physical_address": f"local://{external}/raw/a.csv",
                           "checksum": "c", "size_bytes": 4})
    assert resp.status_code == 403, resp.text
