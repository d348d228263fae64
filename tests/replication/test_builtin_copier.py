"""The builtin copier between stores of different kinds (real stores: moto's S3, Azurite,
the Cloud Storage emulator, a local directory), read directly from the source store.

Whatever etag the source store gave an object (an S3 multipart etag, a Cloud Storage
composite one, a plain MD5), the copy the destination store makes of it must satisfy
the validator: otherwise the mirror would copy it again and again, never promoted.
"""

from __future__ import annotations

import hashlib
import random
from typing import cast

import pytest

from lakefs_core.block.base import BlockStore, ObjectStat, join_address
from lakefs_core.errors import ValidationError
from lakefs_core.graveler.model import AddressType, Entry
from lakefs_core.graveler.presence import CommitValidator, MissingKind, etags_comparable
from replication.copier import BuiltinCopier, CopySource
from replication.source import SourceClient

MIB = 1 << 20
#: 11 MiB: parts of 5 MiB, 5 MiB and 1 MiB when written as a multipart upload
SIZE = 11 * MIB

#: (source store, destination store) fixtures: every kind on either side at least once
PAIRS = [
    ("s3_namespace", "azure_namespace"),
    ("gs_namespace", "s3_namespace"),
    ("azure_namespace", "gs_namespace"),
    ("s3_namespace", "s3_namespace"),
    ("gs_namespace", "local_namespace"),
    ("local_namespace", "azure_namespace"),
]


def _multipart(store: BlockStore, namespace: str, data: bytes) -> ObjectStat:
    """Write ``data`` in 5 MiB parts joined by the store: an S3 multipart upload, a
    Cloud Storage compose (as a completed pre-signed multipart upload does); in one
    piece elsewhere."""
    address = join_address(namespace, "data/multipart.bin")
    if store.type in ("local", "azure"):
        return store.put(address, data)
    if store.type == "gs":
        from lakefs_core.block.gs import GSBlockStore, split_address

        gs = cast(GSBlockStore, store)
        bucket, key = split_address(address)
        parts = []
        for first in range(0, len(data), 5 * MIB):
            part = f"{key}.part-{first}"
            gs.put(f"gs://{bucket}/{part}", data[first:first + 5 * MIB])
            parts.append(gs.client.bucket(bucket).blob(part))
        gs.client.bucket(bucket).blob(key).compose(parts)
        return store.stat(address)
    staged = store.put(join_address(namespace, "staging/whole"), data)
    upload = store.create_multipart_upload(address)
    parts = []
    for number, first in enumerate(range(0, len(data), 5 * MIB), 1):
        last = min(first + 5 * MIB, len(data)) - 1
        parts.append((number, store.upload_part_copy(address, upload, number, staged.address,
                                                     (first, last))))
    return store.complete_multipart_upload(address, upload, parts)


def _entry(namespace: str, stat: ObjectStat) -> Entry:
    relative = stat.address.removeprefix(namespace.rstrip("/") + "/")
    assert relative != stat.address
    return Entry(address=relative, size=stat.size, etag=stat.etag, mtime=stat.mtime)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "-to-".join(
    n.removesuffix("_namespace") for n in p))
def test_direct_copies_across_stores_are_proven_present(
        request: pytest.FixtureRequest, pair: tuple[str, str]) -> None:
    src_store, src_ns = request.getfixturevalue(pair[0])
    if pair[1] == pair[0]:  # the same kind: another namespace of that store
        dst_store, dst_ns = src_store, src_ns.rstrip("/") + "-mirror"
    else:
        dst_store, dst_ns = request.getfixturevalue(pair[1])
    rng = random.Random(str(pair))
    big = rng.randbytes(SIZE)
    small = rng.randbytes(1000)
    stats = {"multipart": _multipart(src_store, src_ns, big),
             "small": src_store.put(join_address(src_ns, "data/small.bin"), small),
             "empty": src_store.put(join_address(src_ns, "data/empty"), b"")}
    entries = {path: _entry(src_ns, stat) for path, stat in stats.items()}
    validator = CommitValidator(dst_store, dst_ns)
    missing = [validator.check_object(path, entry) for path, entry in entries.items()]
    assert all(m is not None and m.kind is MissingKind.OBJECT and m.reason == "missing"
               for m in missing), missing
    copier = BuiltinCopier(concurrency=2, retries=1)
    try:
        # direct from the source store: the API client is never called
        source = CopySource("repo", "", cast(SourceClient, None), src_store, src_ns)
        report = copier.copy(source, dst_store, [m for m in missing if m is not None])
    finally:
        copier.close()
    assert (report.copied, report.failed) == (3, 0)
    for path, entry in entries.items():
        assert validator.check_object(path, entry) is None, (path, entry.etag,
                                                             dst_store.stat(
                                                                 join_address(dst_ns,
                                                                              entry.address)))
    copied = dst_store.get(join_address(dst_ns, entries["multipart"].address))
    assert hashlib.sha256(copied).digest() == hashlib.sha256(big).digest()
    assert dst_store.get(join_address(dst_ns, entries["small"].address)) == small
    # the proof still has teeth: other bytes of the same size are refused by etag when
    # both sides give a digest of the content, and always by size
    victim = join_address(dst_ns, entries["small"].address)
    dst_store.put(victim, bytes(reversed(small)))
    fresh = CommitValidator(dst_store, dst_ns)
    refused = fresh.check_object("small", entries["small"])
    assert refused is not None and refused.reason.startswith("etag "), refused
    dst_store.put(victim, small[:-1])
    refused = CommitValidator(dst_store, dst_ns).check_object("small", entries["small"])
    assert refused is not None and refused.reason.startswith("size "), refused


def test_etags_compared_only_when_both_describe_the_content_alike() -> None:
    md5 = hashlib.md5(b"x", usedforsecurity=False).hexdigest()
    other = hashlib.md5(b"y", usedforsecurity=False).hexdigest()
    assert etags_comparable(md5, other)
    # an S3 multipart etag against a plain MD5, a Cloud Storage composite, Azure's own
    for a, b in ((f"{md5}-3", md5), (f"{md5}-2", "1b2c3d4e-2"), (md5, "0x8DC9A1B2C3D4E5F"),
                 ("", md5)):
        assert not etags_comparable(a, b) and not etags_comparable(b, a), (a, b)


def test_an_imported_object_of_another_kind_of_store_is_refused_by_name(
        azure_namespace: tuple[BlockStore, str]) -> None:
    """An imported object keeps its absolute address: a mirror on Azure cannot hold an
    ``s3://`` one, and validation says so with a typed error naming the address."""
    store, namespace = azure_namespace
    entry = Entry(address="s3://imports/landing/part-0.parquet", size=10, etag="", mtime=0.0,
                  address_type=AddressType.FULL)
    with pytest.raises(ValidationError, match="s3://imports/landing/part-0.parquet"):
        CommitValidator(store, namespace).check_object("landing/part-0.parquet", entry)
