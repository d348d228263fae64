"""What only the local adapter does: files on disk, the etag cache, temp files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from lakefs_core.block import LocalBlockStore
from lakefs_core.errors import StorageError, ValidationError


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_objects_are_files_under_the_root(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))
    store.put("local://ns/a/b.txt", b"hello")
    assert (tmp_path / "ns" / "a" / "b.txt").read_bytes() == b"hello"


def test_files_written_behind_the_store(tmp_path: Path) -> None:
    """A file placed by other means (an import, a copier) gets a correct etag."""
    store = LocalBlockStore(str(tmp_path))
    (tmp_path / "ns").mkdir()
    (tmp_path / "ns" / "outside").write_bytes(b"written elsewhere")
    assert store.stat("local://ns/outside").etag == md5(b"written elsewhere")
    assert [o.etag for o in store.list("local://ns/")] == [md5(b"written elsewhere")]


def test_cached_etag_is_dropped_when_the_file_changes(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))
    store.put("local://ns/k", b"aaaa")
    path = tmp_path / "ns" / "k"
    stat = os.stat(path)
    path.write_bytes(b"bbbb")  # same size, new content
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert store.stat("local://ns/k").etag == md5(b"bbbb")
    assert [o.etag for o in store.list("local://ns/")] == [md5(b"bbbb")]


def test_temp_files_are_not_listed(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))
    store.put("local://ns/real", b"x")
    (tmp_path / "ns" / ".tmp-in-flight").write_bytes(b"partial")
    assert [o.address for o in store.list("local://ns/")] == ["local://ns/real"]


def test_directory_and_file_clashes(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))
    store.put("local://ns/file", b"x")
    with pytest.raises(StorageError, match="local put local://ns/file/child"):
        store.put("local://ns/file/child", b"y")
    with pytest.raises(ValidationError, match="directory"):
        store.put("local://ns/dir/", b"y")


def test_paths_cannot_escape_the_root(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path / "root"))
    for address in ["local://ns/../../escape", "local://..", "local://ns/./x"]:
        with pytest.raises(ValidationError):
            store.put(address, b"x")
    with pytest.raises(ValidationError):
        list(store.list("local://ns/../"))
    assert not (tmp_path / "escape").exists()


def test_root_with_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    store = LocalBlockStore("~/lakefs/data/block")
    store.put("local://ns/k", b"v")
    assert (tmp_path / "lakefs" / "data" / "block" / "ns" / "k").read_bytes() == b"v"


def test_etag_is_cached_with_the_file(tmp_path: Path) -> None:
    """stat answers from the cached etag while size and mtime still match."""
    store = LocalBlockStore(str(tmp_path))
    store.put("local://ns/k", b"content")
    path = str(tmp_path / "ns" / "k")
    cached = os.getxattr(path, "user.lakefs.etag").decode()
    assert cached.startswith(md5(b"content") + ":7:")
    os.setxattr(path, "user.lakefs.etag", cached.replace(md5(b"content"), "f" * 32).encode())
    assert store.stat("local://ns/k").etag == "f" * 32


def test_whole_reads_of_files_and_of_what_is_not_a_file(tmp_path: Path) -> None:
    """A whole read opens, stats and reads the file; a directory, a missing file or a
    path through a file is not found, as a ranged read says."""
    from lakefs_core.errors import ObjectNotFoundError

    store = LocalBlockStore(str(tmp_path))
    big = os.urandom(3 << 20)
    store.put("local://ns/big", big)
    store.put("local://ns/empty", b"")
    store.put("local://ns/dir/inside", b"x")
    assert store.get("local://ns/big") == big
    assert store.get("local://ns/empty") == b""
    assert store.get("local://ns/big", (5, 9)) == big[5:10]
    for address in ("local://ns/dir", "local://ns/missing", "local://ns/big/below"):
        for byte_range in (None, (0, 0)):
            with pytest.raises(ObjectNotFoundError):
                store.get(address, byte_range)
