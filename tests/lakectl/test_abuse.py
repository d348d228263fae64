"""``lakectl abuse`` against a live server on loopback: each load ends by itself after
its ``--amount``, prints its figures and histogram, and leaves what it says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lakectl.commands.abuse import go_duration
from lakefs_testing.live_server import LiveServer, live_server
from tests.lakectl.test_live import api, environment, ok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-abuse"))) as srv:
        assert api(srv, "POST", "/repositories", json={
            "name": "load", "storage_namespace": "local://load"}).status_code == 201
        yield srv


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path))


def _figures(result: Result) -> str:
    """The last run's final figures (the line before its histogram)."""
    lines = result.stdout.splitlines()
    hist = len(lines) - 1 - lines[::-1].index("Histogram (ms):")
    assert lines[hist + 1].startswith("1\t") and lines[-2].startswith("total\t")
    return lines[hist - 2]


def _branches(server: LiveServer, prefix: str) -> list[str]:
    return [b["id"] for b in api(server, "GET", "/repositories/load/branches",
                                 params={"prefix": prefix}).json()["results"]]


def test_create_branches_then_clean(cli: CliRunner, server: LiveServer) -> None:
    out = ok(cli, "abuse", "create-branches", "lakefs://load/main", "--amount", "5",
             "--parallelism", "2", "--branch-prefix", "ab")
    assert out.stdout.startswith("Source ref: lakefs://load/main\n")
    assert _figures(out).startswith("completed: 5, errors: 0, current rate: ")
    assert sorted(_branches(server, "ab-")) == [f"ab-{i}" for i in range(5)]
    ok(cli, "abuse", "create-branches", "lakefs://load/main", "--branch-prefix", "ab",
       "--clean-only", "--parallelism", "2")
    assert _branches(server, "ab") == []


def test_writes_reads_lists_and_deletes(cli: CliRunner, server: LiveServer,
                                        tmp_path: Path) -> None:
    api(server, "POST", "/repositories/load/branches", json={"name": "rw", "source": "main"})
    out = ok(cli, "abuse", "random-write", "lakefs://load/rw", "--amount", "6",
             "--parallelism", "3", "--prefix", "w/")
    assert _figures(out).startswith("completed: 6, errors: 0")
    listed = api(server, "GET", "/repositories/load/refs/rw/objects/ls",
                 params={"prefix": "w/"}).json()["results"]
    assert sorted(o["path"] for o in listed) == [f"w/file-{i}" for i in range(6)]
    keys = tmp_path / "keys"
    keys.write_text("w/file-0\nw/file-1\nw/missing\n")
    out = ok(cli, "abuse", "random-read", "lakefs://load/rw", "--from-file", str(keys),
             "--amount", "30", "--parallelism", "4")
    assert "read a total of 3 keys from key file\n" in out.stdout
    completed, errors = _figures(out).split(", ")[:2]
    assert completed == "completed: 30" and 0 < int(errors.split(": ")[1]) < 30
    out = ok(cli, "abuse", "list", "lakefs://load/rw", "--amount", "4", "--parallelism",
             "2", "--prefix", "w/")
    assert _figures(out).startswith("completed: 4, errors: 0")
    out = ok(cli, "abuse", "random-delete", "lakefs://load/rw", "--from-file", "-",
             "--amount", "1", "--parallelism", "1", input="w/file-5\n")
    assert _figures(out).startswith("completed: 1, errors: 0")
    assert api(server, "GET", "/repositories/load/refs/rw/objects/stat",
               params={"path": "w/file-5"}).status_code == 404


def test_commits_and_merges(cli: CliRunner, server: LiveServer) -> None:
    api(server, "POST", "/repositories/load/branches", json={"name": "cm", "source": "main"})
    api(server, "POST", "/repositories/load/branches/cm/objects", params={"path": "x"},
        content=b"x")
    out = ok(cli, "abuse", "commit", "lakefs://load/cm", "--amount", "3", "--gap", "10ms")
    assert out.stdout.startswith("Source branch: lakefs://load/cm\n")
    assert _figures(out).startswith("completed: 3, errors: 2")  # nothing left to commit
    log = api(server, "GET", "/repositories/load/refs/cm/commits").json()["results"]
    assert log[0]["message"] == "1"
    out = ok(cli, "abuse", "merge", "lakefs://load/cm", "--amount", "4", "--parallelism", "2")
    prefix = out.stdout.splitlines()[1].split()[-1]
    assert _figures(out).startswith("completed: 4, errors: 0")
    merged = api(server, "GET", "/repositories/load/refs/cm/objects/ls",
                 params={"prefix": "object-"}).json()["results"]
    assert sorted(o["path"] for o in merged) == [f"object-{prefix}-{i:04d}"
                                                 for i in range(1, 5)]
    assert _branches(server, prefix) == []  # the merge branches are removed


def test_link_same_object_on_a_store_without_presigning(cli: CliRunner) -> None:
    out = ok(cli, "abuse", "link-same-object", "lakefs://load/main", "--amount", "3",
             "--parallelism", "1", "--key", "linked")
    assert out.stdout.startswith("Source ref: lakefs://load/main\nObject key: linked\n")
    assert _figures(out).startswith("completed: 3, errors: 3")


def test_go_durations() -> None:
    assert go_duration("2s") == 2.0 and go_duration("1m30s") == 90.0
    assert go_duration("0") == 0.0 and go_duration("250ms") == 0.25
    with pytest.raises(Exception, match="invalid duration"):
        go_duration("soon")
