"""What only the S3 adapter does: multipart streaming, paging, error mapping, config."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import pytest

from lakefs_core.block import S3BlockStore, S3Config, S3Credentials
from lakefs_core.errors import ObjectNotFoundError, StorageError, ValidationError
from lakefs_testing.servers import MOTO_ENV, free_port

MIB = 1 << 20

MakeStore = Callable[..., S3BlockStore]


@pytest.fixture
def make_store(moto_endpoint: str) -> Iterator[MakeStore]:
    """Build S3 stores on the moto server with config overrides; closes them afterwards."""
    made: list[S3BlockStore] = []

    def make(**overrides: object) -> S3BlockStore:
        fields: dict[str, object] = {
            "region": "us-east-1",
            "endpoint": moto_endpoint,
            "force_path_style": True,
            "credentials": S3Credentials(access_key_id="testing", secret_access_key="testing"),
        }
        fields.update(overrides)
        store = S3BlockStore(S3Config.model_validate(fields))
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def bucket(s3_blockstore: S3BlockStore, unique_name: str) -> str:
    name = f"s3t-{unique_name}"
    s3_blockstore.client.create_bucket(Bucket=name)
    return name


def test_stream_uploads_parts_before_it_ends(s3_blockstore: S3BlockStore, bucket: str) -> None:
    """A streamed write sends parts as they fill, never the whole object at once."""
    client = s3_blockstore.client
    uploaded_midway: list[int] = []

    def source() -> Iterator[bytes]:
        for i in range(20):
            if i == 18:  # 18 MiB produced: two 8 MiB parts must already be in S3
                uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
                assert len(uploads) == 1
                parts = client.list_parts(Bucket=bucket, Key="big",
                                          UploadId=uploads[0]["UploadId"]).get("Parts", [])
                uploaded_midway.append(len(parts))
            yield bytes([i]) * MIB

    stat = s3_blockstore.put(f"s3://{bucket}/big", source())
    assert uploaded_midway == [2]
    assert stat.size == 20 * MIB
    assert stat.etag.endswith("-3")  # 8 + 8 + 4 MiB
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_failed_stream_aborts_the_upload(s3_blockstore: S3BlockStore, bucket: str) -> None:
    def source() -> Iterator[bytes]:
        yield b"x" * (9 * MIB)
        raise RuntimeError("producer died")

    with pytest.raises(RuntimeError):
        s3_blockstore.put(f"s3://{bucket}/broken", source())
    uploads = s3_blockstore.client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert uploads == []


def test_short_stream_is_one_put_with_md5_etag(s3_blockstore: S3BlockStore, bucket: str) -> None:
    chunks = [b"a" * MIB] * 8  # exactly one part: still a single PutObject
    stat = s3_blockstore.put(f"s3://{bucket}/eight", iter(chunks))
    assert stat.etag == hashlib.md5(b"".join(chunks)).hexdigest()


def test_list_follows_continuation_tokens(make_store: MakeStore, bucket: str) -> None:
    store = make_store(list_page_size=7)
    keys = [f"p/{i:03d}" for i in range(30)]
    for key in reversed(keys):
        store.put(f"s3://{bucket}/{key}", key.encode())
    listed = [o.address for o in store.list(f"s3://{bucket}/p/")]
    assert listed == [f"s3://{bucket}/{k}" for k in keys]
    assert [o.address for o in store.list(f"s3://{bucket}")] == listed


def test_missing_bucket(s3_blockstore: S3BlockStore, unique_name: str) -> None:
    bucket = f"absent-{unique_name}"
    with pytest.raises(StorageError, match=f"put s3://{bucket}/k: NoSuchBucket"):
        s3_blockstore.put(f"s3://{bucket}/k", b"x")
    with pytest.raises(StorageError, match="NoSuchBucket"):
        list(s3_blockstore.list(f"s3://{bucket}/"))
    # reading finds no object there
    with pytest.raises(ObjectNotFoundError):
        s3_blockstore.get(f"s3://{bucket}/k")
    with pytest.raises(ObjectNotFoundError):
        s3_blockstore.stat(f"s3://{bucket}/k")
    assert not s3_blockstore.exists(f"s3://{bucket}/k")


def test_unreachable_endpoint_is_a_storage_error(make_store: MakeStore) -> None:
    store = make_store(endpoint=f"http://127.0.0.1:{free_port()}", max_retries=0)
    with pytest.raises(StorageError, match="s3 get s3://bucket/key"):
        store.get("s3://bucket/key")


def test_bucket_address_needs_a_key(s3_blockstore: S3BlockStore, bucket: str) -> None:
    with pytest.raises(ValidationError, match="no key"):
        s3_blockstore.put(f"s3://{bucket}", b"x")
    with pytest.raises(ValidationError, match="no key"):
        s3_blockstore.get(f"s3://{bucket}/")


def test_default_credential_chain(
    make_store: MakeStore, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without static credentials the store signs with the environment's."""
    for key, value in MOTO_ENV.items():
        monkeypatch.setenv(key, value)
    store = make_store(credentials=None)
    store.put(f"s3://{bucket}/from-env", b"signed")
    assert store.get(f"s3://{bucket}/from-env") == b"signed"


def test_multipart_parts_grow_for_long_streams(
    make_store: MakeStore, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Part size doubles every 1000 parts so that any stream fits S3's 10,000-part cap;
    check the arithmetic with a step of 2 parts instead of 1000."""
    import lakefs_core.block.s3 as s3_module

    monkeypatch.setattr(s3_module, "_PARTS_PER_SIZE_STEP", 2)  # parts: 5, 5, 10, 10 MiB, ...
    store = make_store(multipart_part_size=5 * MIB)
    stat = store.put(f"s3://{bucket}/grown", (b"g" * MIB for _ in range(26)))
    assert stat.size == 26 * MIB
    assert stat.etag.endswith("-4")  # 5 + 5 + 10 + 6
    parts = store.client.head_object(Bucket=bucket, Key="grown", PartNumber=3)
    assert parts["ContentLength"] == 10 * MIB
