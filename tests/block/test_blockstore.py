"""One behaviour suite for every blockstore: local files, S3 on moto, Azure on Azurite
(the stores are listed in ``BLOCKSTORE_NAMESPACES`` of tests/conftest.py)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from lakefs_core.block import BlockStore, join_address
from lakefs_core.errors import ObjectNotFoundError, ValidationError

MIB = 1 << 20


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_put_get_roundtrip(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "data/a/object.bin")
    payload = os.urandom(1000)
    written = store.put(address, payload)
    assert written.address == address
    assert written.size == 1000
    assert written.etag == md5(payload)
    assert store.get(address) == payload
    stat = store.stat(address)
    assert (stat.address, stat.size, stat.etag) == (address, 1000, md5(payload))
    assert stat.mtime > 0


def test_put_accepts_chunks_and_empty(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    store.put(join_address(ns, "list"), [b"in ", b"a ", b"list"])
    store.put(join_address(ns, "chunks"), iter([b"ab", b"", b"cd"]))
    store.put(join_address(ns, "empty"), b"")
    assert store.get(join_address(ns, "list")) == b"in a list"
    assert store.get(join_address(ns, "chunks")) == b"abcd"
    assert store.get(join_address(ns, "empty")) == b""
    assert store.stat(join_address(ns, "empty")).etag == md5(b"")


def test_overwrite_replaces_content(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "k")
    store.put(address, b"first version")
    second = store.put(address, b"second")
    assert store.get(address) == b"second"
    assert store.stat(address).etag == second.etag == md5(b"second")


def test_range_get(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "ranged")
    store.put(address, b"0123456789")
    assert store.get(address, (0, 0)) == b"0"
    assert store.get(address, (2, 5)) == b"2345"
    assert store.get(address, (9, 9)) == b"9"
    assert store.get(address, (7, 100)) == b"789"  # cut at the end
    assert store.get(address, (10, 20)) == b""  # starts past the end


@pytest.mark.parametrize("bad_range", [(-1, 3), (5, 4)])
def test_invalid_range_is_rejected(
    blockstore_namespace: tuple[BlockStore, str], bad_range: tuple[int, int]
) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "ranged")
    store.put(address, b"0123456789")
    with pytest.raises(ValidationError):
        store.get(address, bad_range)


def test_get_stream(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "streamed")
    payload = os.urandom(100_000)
    store.put(address, payload)
    chunks = list(store.get_stream(address, chunk_size=30_000))
    assert b"".join(chunks) == payload
    assert len(chunks) >= 4
    assert all(len(c) <= 30_000 for c in chunks)


def test_missing_objects(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    missing = join_address(ns, "no/such/object")
    with pytest.raises(ObjectNotFoundError):
        store.get(missing)
    with pytest.raises(ObjectNotFoundError):
        store.get(missing, (0, 10))
    with pytest.raises(ObjectNotFoundError):
        store.get_stream(missing)
    with pytest.raises(ObjectNotFoundError):
        store.stat(missing)
    with pytest.raises(ObjectNotFoundError):
        store.copy(missing, join_address(ns, "dst"))
    assert not store.exists(missing)
    assert not store.exists(join_address(ns, "dst"))


def test_exists_and_delete(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "dir/obj")
    store.put(address, b"x")
    assert store.exists(address)
    store.delete(address)
    assert not store.exists(address)
    with pytest.raises(ObjectNotFoundError):
        store.get(address)
    store.delete(address)  # deleting a missing object is not an error
    store.delete(join_address(ns, "never/was"))


KEYS = ["b/c", "a.txt", "ab", "a/z", "a/b/c", "a0", "dir/ü-名.txt", "a/b/d"]


def test_list_order_and_prefix(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    for key in KEYS:
        store.put(join_address(ns, key), key.encode())
    store.put(ns.rsplit("/", 1)[0] + "/elsewhere", b"outside the namespace")

    listed = list(store.list(ns + "/"))
    assert [o.address for o in listed] == sorted(join_address(ns, k) for k in KEYS)
    for obj in listed:
        key = obj.address[len(ns) + 1:]
        assert obj.size == len(key.encode())
        assert obj.etag == md5(key.encode())

    def keys(prefix: str) -> list[str]:
        return [o.address[len(ns) + 1:] for o in store.list(join_address(ns, prefix))]

    assert keys("a/") == ["a/b/c", "a/b/d", "a/z"]
    assert keys("a") == ["a.txt", "a/b/c", "a/b/d", "a/z", "a0", "ab"]
    assert keys("a/b") == ["a/b/c", "a/b/d"]
    assert keys("dir/ü") == ["dir/ü-名.txt"]
    assert keys("zzz") == []
    assert list(store.list(join_address(ns, "nothing-here/"))) == []


def test_copy(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    src = join_address(ns, "src/object")
    dst = join_address(ns, "dst/deeper/copy")
    payload = os.urandom(5000)
    store.put(src, payload)
    copied = store.copy(src, dst)
    assert copied.address == dst
    assert copied.size == 5000
    assert copied.etag == md5(payload)
    assert store.get(dst) == payload
    assert store.get(src) == payload
    assert store.stat(dst).etag == copied.etag


def _chunks(total: int, size: int) -> Iterator[bytes]:
    block = bytes(range(256)) * (size // 256)
    sent = 0
    while sent < total:
        piece = block[: min(size, total - sent)]
        sent += len(piece)
        yield piece


def test_streaming_put_of_20_mib(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "big/object")
    total = 20 * MIB + 12345
    seen_midway: list[bool] = []

    def source() -> Iterator[bytes]:
        for i, chunk in enumerate(_chunks(total, 256 * 1024)):
            if i == 60:  # 15 MiB in: nothing may be visible yet
                seen_midway.append(store.exists(address))
            yield chunk

    written = store.put(address, source())
    assert seen_midway == [False]
    assert written.size == total
    stat = store.stat(address)
    assert stat.size == total
    assert stat.etag == written.etag
    digest = hashlib.sha256()
    for chunk in store.get_stream(address):
        digest.update(chunk)
    expected = hashlib.sha256()
    for chunk in _chunks(total, 256 * 1024):
        expected.update(chunk)
    assert digest.hexdigest() == expected.hexdigest()
    assert store.get(address, (total - 3, total + 10)) == b"".join(_chunks(total, 256 * 1024))[-3:]


def test_failed_streaming_put_leaves_nothing(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "broken/object")

    def source() -> Iterator[bytes]:
        yield from _chunks(10 * MIB, MIB)
        raise RuntimeError("producer died")

    with pytest.raises(RuntimeError, match="producer died"):
        store.put(address, source())
    assert not store.exists(address)
    assert list(store.list(join_address(ns, "broken/"))) == []


def test_failed_put_keeps_previous_version(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace
    address = join_address(ns, "kept")
    store.put(address, b"old")

    def source() -> Iterator[bytes]:
        yield b"new, partial"
        raise RuntimeError("producer died")

    with pytest.raises(RuntimeError):
        store.put(address, source())
    assert store.get(address) == b"old"


def _bad_addresses(store: BlockStore) -> list[str]:
    other = "local" if store.scheme == "s3" else "s3"
    return [
        "plain/key",
        f"{other}://bucket/key",
        f"{store.scheme}://",
        f"{store.scheme}:/missing-slash/key",
    ]


def test_bad_addresses_raise_validation_error(
    blockstore_namespace: tuple[BlockStore, str],
) -> None:
    store, _ = blockstore_namespace
    for address in _bad_addresses(store):
        with pytest.raises(ValidationError):
            store.put(address, b"x")
        with pytest.raises(ValidationError):
            store.get(address)
        with pytest.raises(ValidationError):
            store.stat(address)
        with pytest.raises(ValidationError):
            store.delete(address)
        with pytest.raises(ValidationError):
            list(store.list(address))


def test_thread_safety(blockstore_namespace: tuple[BlockStore, str]) -> None:
    store, ns = blockstore_namespace

    def work(worker: int) -> list[bool]:
        results = []
        for i in range(8):
            address = join_address(ns, f"threads/{worker}/{i}")
            payload = f"{worker}-{i}".encode() * 100
            store.put(address, payload)
            results.append(store.get(address) == payload)
        return results

    with ThreadPoolExecutor(8) as pool:
        outcomes = [ok for batch in pool.map(work, range(8)) for ok in batch]
    assert outcomes == [True] * 64
    assert len(list(store.list(join_address(ns, "threads/")))) == 64
