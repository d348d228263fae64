"""The session's real servers start and answer."""

import contextlib
import threading

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


def test_moto_dynamodb_keeps_writes_made_while_a_transaction_fails(
        moto_endpoint: str, unique_name: str) -> None:
    """A transaction whose condition fails leaves other clients' writes alone, as in
    DynamoDB. (moto by itself puts back a copy of its tables taken when the transaction
    began, undoing what others wrote meanwhile; ``lakefs_testing.moto_server`` takes
    DynamoDB requests one at a time so that it cannot.)"""
    ddb = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name="us-east-1")
    ddb.create_table(TableName=unique_name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}])
    try:
        n = 60
        for i in range(n):
            ddb.put_item(TableName=unique_name, Item={"k": {"S": f"old-{i}"}})
        writing = threading.Event()
        # the client's exception classes, loaded before the threads share the client: two
        # threads loading them at once can each get classes of their own
        canceled = ddb.exceptions.TransactionCanceledException

        def failing_transactions() -> None:
            while not writing.is_set():
                with contextlib.suppress(canceled):
                    ddb.transact_write_items(TransactItems=[
                        {"ConditionCheck": {"TableName": unique_name,
                                            "Key": {"k": {"S": "never"}},
                                            "ConditionExpression": "attribute_exists(k)"}},
                        {"Put": {"TableName": unique_name, "Item": {"k": {"S": "x"}}}}])

        threads = [threading.Thread(target=failing_transactions) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            for i in range(n):
                ddb.delete_item(TableName=unique_name, Key={"k": {"S": f"old-{i}"}})
                ddb.put_item(TableName=unique_name, Item={"k": {"S": f"new-{i}"}})
        finally:
            writing.set()
            for t in threads:
                t.join()
        keys = {item["k"]["S"] for page in ddb.get_paginator("scan").paginate(
            TableName=unique_name, ConsistentRead=True) for item in page["Items"]}
        assert keys == {f"new-{i}" for i in range(n)}
    finally:
        ddb.delete_table(TableName=unique_name)
