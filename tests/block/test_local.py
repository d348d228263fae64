"""What only the local adapter does: files on disk, the etag cache, temp files."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _paused_write(store: LocalBlockStore, address: str, first: bytes, rest: bytes
                  ) -> tuple[threading.Thread, threading.Event]:
    """Start ``store.put`` of ``first`` then ``rest`` in a thread, held between them
    once ``first`` is written; the thread, and the event that lets it go on."""
    written, release = threading.Event(), threading.Event()

    def chunks() -> Iterator[bytes]:
        yield first
        written.set()
        release.wait(10)
        yield rest

    thread = threading.Thread(target=store.put, args=(address, chunks()))
    thread.start()
    assert written.wait(10)
    return thread, release


def test_an_object_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    """Where the filesystem makes files without a name (Linux: ext4, tmpfs), a write in
    progress is under no name at all, not even a temporary one: a copier or a listing
    that looks in the directory meanwhile finds nothing, and then the whole object."""
    store = LocalBlockStore(str(tmp_path))
    assert store._unnamed  # this machine's filesystems make them: the test can fail
    store.put("local://ns/other", b"o")
    thread, release = _paused_write(store, "local://ns/new", b"first half,", b" second")
    try:
        assert sorted(os.listdir(tmp_path / "ns")) == ["other"]
        assert [o.address for o in store.list("local://ns/")] == ["local://ns/other"]
    finally:
        release.set()
        thread.join(10)
    assert (tmp_path / "ns" / "new").read_bytes() == b"first half, second"
    assert sorted(os.listdir(tmp_path / "ns")) == ["new", "other"]
    stat = store.stat("local://ns/new")
    assert (stat.size, stat.etag) == (18, md5(b"first half, second"))
    cached = os.getxattr(tmp_path / "ns" / "new", "user.lakefs.etag").decode()
    assert cached.startswith(md5(b"first half, second") + ":18:")


def test_a_replaced_object_is_the_old_one_until_the_new_one_is_whole(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))
    store.put("local://ns/k", b"old")
    thread, release = _paused_write(store, "local://ns/k", b"new, ", b"longer")
    try:
        assert (tmp_path / "ns" / "k").read_bytes() == b"old"
    finally:
        release.set()
        thread.join(10)
    assert (tmp_path / "ns" / "k").read_bytes() == b"new, longer"
    assert store.stat("local://ns/k").etag == md5(b"new, longer")
    assert os.listdir(tmp_path / "ns") == ["k"]  # no temporary name left behind


def test_a_write_cut_short_leaves_nothing(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))

    def failing() -> Iterator[bytes]:
        yield b"some"
        raise ConnectionResetError("the client went away")

    for address in ("local://ns/new", "local://ns/dir/first"):
        with pytest.raises(StorageError, match="went away"):
            store.put(address, failing())
    store.put("local://ns/kept", b"kept")
    with pytest.raises(StorageError):
        store.put("local://ns/kept", failing())
    assert (tmp_path / "ns" / "kept").read_bytes() == b"kept"
    assert sorted(os.listdir(tmp_path / "ns")) == ["dir", "kept"]
    assert os.listdir(tmp_path / "ns" / "dir") == []


def test_named_temporary_files_where_unnamed_ones_cannot_be_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem without ``O_TMPFILE`` (or a directory on one): the store writes a
    temporary file and renames it, with the same results."""
    import errno

    from lakefs_core.block import local

    real_open = os.open

    def refusing(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "not supported")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(local.os, "open", refusing)
    store = LocalBlockStore(str(tmp_path))
    assert not store._unnamed  # the probe found none
    store._unnamed = True  # and a directory refusing them after all
    for s in (store, LocalBlockStore(str(tmp_path))):
        s.put("local://ns/a", b"aa")
        s.put("local://ns/a", b"bbb")
        s.put("local://ns/d/b", [b"c", b"d"])
        assert (tmp_path / "ns" / "a").read_bytes() == b"bbb"
        assert (tmp_path / "ns" / "d" / "b").read_bytes() == b"cd"
        assert s.stat("local://ns/a").etag == md5(b"bbb")
        assert sorted(os.listdir(tmp_path / "ns")) == ["a", "d"]


def _flags(fd: int) -> int:
    """A directory's attribute flags (``lsattr``), read through ``fd``."""
    import fcntl
    import struct

    from lakefs_core.block import local

    (flags,) = struct.unpack("i", fcntl.ioctl(fd, local._GET_FLAGS, bytes(4)))
    return int(flags)


def _is_top(path: Path) -> bool:
    """Whether ``path`` carries the "top of a directory hierarchy" mark (``lsattr``'s T)."""
    from lakefs_core.block import local

    fd = os.open(path, os.O_RDONLY)
    try:
        return bool(_flags(fd) & local._TOP_FLAG)
    finally:
        os.close(fd)


def _can_mark_tops(directory: Path) -> bool:
    """Whether the filesystem of ``directory`` keeps the mark: tried on a directory of its
    own, as ``chattr +T`` would."""
    import fcntl
    import struct

    from lakefs_core.block import local

    probe = directory / "probe"
    probe.mkdir()
    fd = os.open(probe, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, local._SET_FLAGS, struct.pack("i", _flags(fd) | local._TOP_FLAG))
    except OSError:
        return False
    finally:
        os.close(fd)
        probe.rmdir()
    return True


def test_directories_the_store_makes_are_tops_of_hierarchies(tmp_path: Path) -> None:
    """Every directory the store makes (root included) is marked, where the filesystem
    keeps the mark, so that ext4 spreads object directories over the disk; directories
    that were there before are left as they are."""
    existing = tmp_path / "existing"
    existing.mkdir()
    marks = _can_mark_tops(tmp_path)
    store = LocalBlockStore(str(tmp_path / "root"))
    store.put("local://ns/data/prefix/object", b"x")
    store.put("local://ns/data/prefix/second", b"y")  # its directory is there already
    store.put("local://ns/_lakefs/range", [b"r"])
    made = [tmp_path / "root", tmp_path / "root" / "ns", tmp_path / "root" / "ns" / "data",
            tmp_path / "root" / "ns" / "data" / "prefix", tmp_path / "root" / "ns" / "_lakefs"]
    assert [_is_top(d) for d in made] == [marks] * len(made)
    LocalBlockStore(str(existing)).put("local://ns/object", b"z")
    assert not _is_top(existing)
    assert _is_top(existing / "ns") == marks
    assert store.get("local://ns/data/prefix/object") == b"x"
    # this machine's temporary directory (ext4) keeps the mark: the test is not vacuous
    if Path(tempfile.gettempdir()).resolve() == Path("/tmp") and _fs_type("/tmp") == "ext4":
        assert marks


def test_directories_where_the_filesystem_has_no_marks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem refusing the mark (tmpfs, XFS...): the store makes its directories and
    writes as before; four writers making one directory at once all succeed."""
    import errno

    from lakefs_core.block import local

    calls: list[int] = []

    def refusing(fd: int, request: int, arg: Any = 0) -> Any:
        calls.append(request)
        raise OSError(errno.ENOTTY, "inappropriate ioctl for device")

    import fcntl

    monkeypatch.setattr(fcntl, "ioctl", refusing)
    store = LocalBlockStore(str(tmp_path / "root"))
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        barrier.wait()
        try:
            store.put(f"local://ns/deep/dir/{n}", b"%d" % n)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(os.listdir(tmp_path / "root" / "ns" / "deep" / "dir")) == ["0", "1", "2", "3"]
    assert calls and set(calls) == {local._GET_FLAGS}  # asked, refused, nothing more


def _fs_type(path: str) -> str:
    """The filesystem type of the mount holding ``path`` (from /proc/self/mounts)."""
    best, kind = "", ""
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and path.startswith(fields[1]) and len(fields[1]) > len(best):
                best, kind = fields[1], fields[2]
    return kind
