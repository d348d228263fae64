"""The session's real servers start and answer."""

import boto3
import sqlalchemy as sa

from lakefs_core.block.local import LocalBlockStore


def test_postgres_answers(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select 40 + 2")).scalar() == 42
    engine.dispose()


def test_moto_s3_answers(moto_endpoint: str, unique_name: str) -> None:
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=unique_name)
    s3.put_object(Bucket=unique_name, Key="k", Body=b"v")
    assert s3.get_object(Bucket=unique_name, Key="k")["Body"].read() == b"v"


def test_local_blockstore_roundtrip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalBlockStore(str(tmp_path))
    st = store.put("local://ns/a/b.txt", b"hello")
    assert st.size == 5
    assert store.get("local://ns/a/b.txt", (1, 3)) == b"ell"
    assert [o.address for o in store.list("local://ns/a/")] == ["local://ns/a/b.txt"]
