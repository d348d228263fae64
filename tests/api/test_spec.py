"""lakefs-spec (fsspec) against a live server: file-system operations, transactions,
and pandas and DuckDB reading ``lakefs://repo/ref/path``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import lakefs
import pandas as pd
import pytest
from lakefs.client import Client
from lakefs.exceptions import ConflictException
from lakefs_spec import LakeFSFileSystem

from lakefs_testing.live_server import LiveServer, live_server

_names = itertools.count()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("spec-server"))) as s:
        yield s


@pytest.fixture
def options(srv: LiveServer) -> dict[str, Any]:
    """fsspec storage options for the server."""
    return {"host": srv.endpoint, "username": srv.access_key_id,
            "password": srv.secret_access_key}


@pytest.fixture
def fs(options: dict[str, Any]) -> LakeFSFileSystem:
    return LakeFSFileSystem(**options, skip_instance_cache=True)


@pytest.fixture
def repo(srv: LiveServer) -> lakefs.Repository:
    client = Client(host=srv.endpoint, username=srv.access_key_id,
                    password=srv.secret_access_key)
    name = f"spec-{next(_names)}"
    return lakefs.Repository(name, client=client).create(storage_namespace=f"local://{name}")


def test_put_ls_info_open_and_rm(fs: LakeFSFileSystem, repo: lakefs.Repository,
                                 tmp_path: Path) -> None:
    root = f"lakefs://{repo.id}/main"
    local = tmp_path / "hello.txt"
    local.write_bytes(b"hello lakefs-spec\n")
    fs.put_file(str(local), f"{root}/dir/hello.txt")
    fs.pipe_file(f"{root}/dir/sub/data.bin", b"\x00\x01\x02")
    fs.pipe_file(f"{root}/top.txt", b"top")

    assert sorted(fs.ls(f"{root}/dir/", detail=False)) == [
        f"{repo.id}/main/dir/hello.txt", f"{repo.id}/main/dir/sub/"]
    assert sorted(fs.ls(f"{root}/dir", detail=False, refresh=True)) == [
        f"{repo.id}/main/dir/hello.txt", f"{repo.id}/main/dir/sub/"]
    assert fs.find(f"{root}/") == [f"{repo.id}/main/dir/hello.txt",
                                   f"{repo.id}/main/dir/sub/data.bin", f"{repo.id}/main/top.txt"]

    info = fs.info(f"{root}/dir/hello.txt")
    assert info["type"] == "file"
    assert info["size"] == 18
    assert info["checksum"] == fs.checksum(f"{root}/dir/hello.txt")
    dir_info = fs.info(f"{root}/dir/")
    assert dir_info["type"] == "directory"
    assert fs.exists(f"{root}/dir")
    assert not fs.exists(f"{root}/nothing")

    with fs.open(f"{root}/dir/hello.txt", "rb") as f:
        assert f.read(5) == b"hello"
        assert f.read() == b" lakefs-spec\n"
    assert fs.cat_file(f"{root}/dir/sub/data.bin") == b"\x00\x01\x02"
    assert fs.tail(f"{root}/dir/hello.txt", 5) == b"spec\n"
    with pytest.raises(FileNotFoundError):
        fs.open(f"{root}/missing.txt", "rb")

    fs.get_file(f"{root}/top.txt", str(tmp_path / "top.txt"))
    assert (tmp_path / "top.txt").read_bytes() == b"top"
    with pytest.raises(FileExistsError):
        fs.put_file(str(local), f"{root}/dir/hello.txt", mode="create")

    fs.rm(f"{root}/top.txt")
    assert not fs.exists(f"{root}/top.txt")
    fs.rm(f"{root}/dir/", recursive=True)
    assert fs.ls(f"{root}/", detail=False, refresh=True) == []


def test_copy_and_write_modes(fs: LakeFSFileSystem, repo: lakefs.Repository) -> None:
    root = f"lakefs://{repo.id}/main"
    with fs.open(f"{root}/a.txt", "w") as f:
        f.write("text mode\n")
    fs.cp_file(f"{root}/a.txt", f"{root}/copies/b.txt")
    assert fs.cat_file(f"{root}/copies/b.txt") == b"text mode\n"
    with pytest.raises(FileExistsError), fs.open(f"{root}/a.txt", "xb") as f:
        f.write(b"exclusive")
    assert fs.cat_file(f"{root}/a.txt") == b"text mode\n"
    fs.touch(f"{root}/empty")
    assert fs.info(f"{root}/empty")["size"] == 0
    # writing to a new branch creates it from main's head commit
    repo.branch("main").commit("a.txt and friends")
    fs.pipe_file(f"lakefs://{repo.id}/feature/new.txt", b"on a branch")
    assert fs.cat_file(f"lakefs://{repo.id}/feature/a.txt") == b"text mode\n"
    assert not fs.exists(f"{root}/new.txt")


def test_transactions_commit_merge_or_leave_base_untouched(
        fs: LakeFSFileSystem, repo: lakefs.Repository, tmp_path: Path) -> None:
    local = tmp_path / "rows.csv"
    local.write_text("x,y\n1,2\n")
    with fs.transaction(repo.id, "main") as tx:
        fs.put_file(str(local), f"lakefs://{repo.id}/{tx.branch.id}/rows.csv")
        fs.pipe_file(f"lakefs://{repo.id}/{tx.branch.id}/more.txt", b"more")
        commit = tx.commit(message="add rows")
        tag = tx.tag(commit, name="v1")
        ephemeral = tx.branch.id
    main = repo.branch("main")
    assert sorted(o.path for o in main.objects()) == ["more.txt", "rows.csv"]
    assert not any(b.id == ephemeral for b in repo.branches())
    assert fs.cat_file(f"lakefs://{repo.id}/{tag.id}/rows.csv") == b"x,y\n1,2\n"
    assert main.get_commit().parents  # a merge commit on main

    head = main.get_commit().id
    with pytest.raises(RuntimeError, match="abandon"), fs.transaction(repo.id, "main") as tx:
        fs.pipe_file(f"lakefs://{repo.id}/{tx.branch.id}/partial.txt", b"p")
        tx.commit(message="partial")
        raise RuntimeError("abandon")
    assert main.get_commit().id == head
    assert not fs.exists(f"lakefs://{repo.id}/main/partial.txt")


def test_put_file_of_unchanged_content_commits_nothing(
        fs: LakeFSFileSystem, repo: lakefs.Repository, tmp_path: Path) -> None:
    """put_file compares the local MD5 with the object's checksum and skips the upload."""
    local = tmp_path / "same.csv"
    local.write_text("a,b\n1,2\n")
    main = repo.branch("main")
    fs.put_file(str(local), f"lakefs://{repo.id}/main/same.csv")
    main.commit("first upload")
    head = main.get_commit().id
    with fs.transaction(repo.id, "main") as tx:
        fs.put_file(str(local), f"lakefs://{repo.id}/{tx.branch.id}/same.csv")
        assert list(tx.branch.uncommitted()) == []
        assert tx.commit(message="nothing new").get_commit().id == head
    assert main.get_commit().id == head  # nothing to merge either
    local.write_text("a,b\n1,3\n")
    fs.put_file(str(local), f"lakefs://{repo.id}/main/same.csv")
    assert [(c.path, c.type) for c in main.uncommitted()] == [("same.csv", "changed")]


def test_transaction_tag_that_exists(fs: LakeFSFileSystem, repo: lakefs.Repository) -> None:
    """As lakeFS: 409 "tag already exists", and the transaction's branch is left over."""
    main = repo.branch("main")
    fs.pipe_file(f"lakefs://{repo.id}/main/f", b"1")
    lakefs.Tag(repo.id, "v1", client=fs.client).create(main.commit("one"))
    with pytest.raises(ConflictException) as info, fs.transaction(repo.id, "main") as tx:
        fs.pipe_file(f"lakefs://{repo.id}/{tx.branch.id}/g", b"2")
        tx.tag(tx.commit(message="two"), name="v1")
    assert info.value.status_code == 409
    assert "tag already exists" in info.value.body["message"]
    assert not fs.exists(f"lakefs://{repo.id}/main/g")  # not merged
    assert any(b.id == tx.branch.id for b in repo.branches())


def test_pandas_and_duckdb_read_lakefs_urls(fs: LakeFSFileSystem, options: dict[str, Any],
                                            repo: lakefs.Repository) -> None:
    frame = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"],
                          "score": [0.5, 1.5, 2.5]})
    table = f"lakefs://{repo.id}/main/tables/scores.parquet"
    frame.to_parquet(table, storage_options=options, index=False)
    frame.to_csv(f"lakefs://{repo.id}/main/tables/scores.csv", storage_options=options,
                 index=False)
    commit = repo.branch("main").commit("add tables").get_commit().id

    pd.testing.assert_frame_equal(pd.read_parquet(table, storage_options=options), frame)
    at_commit = pd.read_parquet(f"lakefs://{repo.id}/{commit}/tables/scores.parquet",
                                storage_options=options)
    pd.testing.assert_frame_equal(at_commit, frame)
    csv = pd.read_csv(f"lakefs://{repo.id}/main/tables/scores.csv", storage_options=options)
    pd.testing.assert_frame_equal(csv, frame)

    # a later change on main does not alter what the commit id reads
    frame.head(1).to_parquet(table, storage_options=options, index=False)
    assert len(pd.read_parquet(table, storage_options=options)) == 1

    con = duckdb.connect()
    try:
        con.register_filesystem(fs)
        rows = con.sql(
            f"SELECT id, name, score FROM read_parquet('lakefs://{repo.id}/{commit}/"
            "tables/scores.parquet') ORDER BY id").fetchall()
        assert rows == [(1, "a", 0.5), (2, "b", 1.5), (3, "c", 2.5)]
        total = con.sql(
            f"SELECT sum(score) FROM read_csv('lakefs://{repo.id}/{commit}/tables/scores.csv')"
        ).fetchall()
        assert total == [(4.5,)]
        latest = con.sql(
            f"SELECT count(*) FROM read_parquet('lakefs://{repo.id}/main/tables/*.parquet')"
        ).fetchall()
        assert latest == [(1,)]
    finally:
        con.close()
