"""Opening a refstore by lakeFS ``database.type``, and how database failures surface."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psycopg
import pytest

from lakefs_core.errors import DatabaseError, ValidationError
from lakefs_core.graveler.model import Branch, Entry, EntryRecord, Repository
from lakefs_core.refstore import (
    DatabaseType,
    RefStore,
    SQLRefStore,
    local_database_url,
    open_refstore,
    postgres_url,
)
from lakefs_testing.servers import PostgresServer, free_port


def _create_repo(store: RefStore, repo_id: str = "r1") -> None:
    repo = Repository(id=repo_id, storage_namespace="local://ns", default_branch="main",
                      creation_date=1)
    store.create_repository(repo, Branch("main", "c0", "t0"))


def test_local_creates_the_file_and_its_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "metadata.db"
    with open_refstore("local", sqlite_path=str(path)) as store:
        assert isinstance(store, SQLRefStore)
        _create_repo(store)
    assert path.is_file()
    with open_refstore(DatabaseType.LOCAL, sqlite_path=str(path)) as store:
        assert store.get_repository("r1").id == "r1"


def test_local_path_that_is_a_directory_holds_the_database(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "lakefs" / "metadata").mkdir(parents=True)
    with open_refstore("local", sqlite_path="~/lakefs/metadata") as store:
        _create_repo(store)
    db_file = tmp_path / "lakefs" / "metadata" / "refstore.db"
    assert db_file.is_file()
    assert local_database_url("~/lakefs/metadata") == f"sqlite:///{db_file}"


def test_local_needs_a_path() -> None:
    with pytest.raises(ValidationError, match=r"database\.local\.path"):
        open_refstore("local")


def test_unknown_type_names_the_valid_ones() -> None:
    with pytest.raises(ValidationError, match="unknown database type 'cosmosdb'") as info:
        open_refstore("cosmosdb")
    assert "local, postgres, dynamodb" in str(info.value)


def test_the_embedded_default_loads_no_other_database_driver(tmp_path: Path) -> None:
    """A server on SQLite and local storage imports neither boto3 (DynamoDB) nor
    PostgreSQL's dialect or driver: each loads when its type is chosen."""
    code = textwrap.dedent(f"""
        import sys
        from lakefs_core.config import load_server_config
        from lakefs_core.server import create_app
        from lakefs_core.services import build_services
        config = load_server_config(None, {{"LAKEFS_DATA_DIR": {str(tmp_path)!r}}})
        services = build_services(config)
        create_app(services)
        services.close()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "botocore", "psycopg")
                     or m.startswith(("sqlalchemy.dialects.postgresql", "lakefs_core.dynamodb"))))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_dynamodb_needs_a_table_name() -> None:
    with pytest.raises(ValidationError, match="database.dynamodb.table_name"):
        open_refstore("dynamodb")


def test_dynamodb_creates_a_provisioned_table_when_capacities_are_set(
        moto_endpoint: str, unique_name: str) -> None:
    from lakefs_testing.servers import MOTO_ENV

    options = {"table_name": unique_name, "endpoint": moto_endpoint,
               "region": MOTO_ENV["AWS_DEFAULT_REGION"],
               "access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
               "secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}
    with pytest.raises(ValidationError, match="read_capacity_units"):
        open_refstore("dynamodb", dynamodb={**options, "read_capacity_units": 5})
    with open_refstore("dynamodb", dynamodb={**options, "read_capacity_units": 7,
                                             "write_capacity_units": 3}) as store:
        table = store.client.describe_table(TableName=unique_name)["Table"]  # type: ignore[attr-defined]
        assert table["ProvisionedThroughput"]["ReadCapacityUnits"] == 7
        assert table["ProvisionedThroughput"]["WriteCapacityUnits"] == 3
        store.client.delete_table(TableName=unique_name)  # type: ignore[attr-defined]


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_postgres_accepts_libpq_urls(postgres_server: PostgresServer, unique_name: str,
                                     scheme: str) -> None:
    sa_url = postgres_server.create_database(unique_name.replace("-", "_"))
    connection_string = sa_url.replace("postgresql+psycopg://", f"{scheme}://", 1)
    with open_refstore("postgres", connection_string=connection_string) as store:
        _create_repo(store)
    with open_refstore("postgres", connection_string=connection_string) as store:
        assert [r.id for r in store.list_repositories()] == ["r1"]


def test_postgres_url_conversion() -> None:
    assert postgres_url("postgres://u:p@h:5432/db?sslmode=disable") == (
        "postgresql+psycopg://u:p@h:5432/db?sslmode=disable")
    assert postgres_url("postgresql://h/db") == "postgresql+psycopg://h/db"
    for bad in ("mysql://h/db", "host=h dbname=db", "postgresql+asyncpg://h/db"):
        with pytest.raises(ValidationError):
            postgres_url(bad)


def test_postgres_needs_a_connection_string() -> None:
    with pytest.raises(ValidationError, match=r"connection_string"):
        open_refstore("postgres")


def test_unreachable_postgres_fails_at_open_without_leaking_the_password() -> None:
    url = f"postgres://lakefs:s3cret@127.0.0.1:{free_port()}/lakefs"
    with pytest.raises(DatabaseError) as info:
        open_refstore("postgres", connection_string=url)
    message = str(info.value)
    assert "127.0.0.1" in message
    assert "s3cret" not in message


def test_unopenable_sqlite_file_fails_at_open(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(DatabaseError):
        open_refstore("local", sqlite_path=str(blocker / "sub" / "refstore.db"))


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://h/db", "::"])
def test_unsupported_urls(url: str) -> None:
    with pytest.raises(ValidationError):
        SQLRefStore(url)


def test_lost_postgres_database_surfaces_as_database_error(
        postgres_server: PostgresServer, unique_name: str) -> None:
    name = unique_name.replace("-", "_")
    store = SQLRefStore(postgres_server.create_database(name))
    try:
        _create_repo(store)
        with psycopg.connect(postgres_server.dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        with pytest.raises(DatabaseError):
            store.get_repository("r1")
    finally:
        store.close()


def test_text_postgres_cannot_store_is_a_validation_error(pg_url: str) -> None:
    with SQLRefStore(pg_url) as store, pytest.raises(ValidationError):
        _create_repo(store)
        store.put_staged("r1", "t1", EntryRecord("nul\x00path", None))


class WriteLockHolder(threading.Thread):
    """Holds SQLite's write lock from another connection until released."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.locked = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self.locked.set()
            self.release.wait(30)
            conn.execute("COMMIT")
        finally:
            conn.close()

    def __enter__(self) -> WriteLockHolder:
        self.start()
        assert self.locked.wait(10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()
        self.join()


def test_sqlite_writer_retries_while_another_connection_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "refstore.db"
    with SQLRefStore(f"sqlite:///{path}", busy_timeout=0.02) as store:
        _create_repo(store)
    with SQLRefStore(f"sqlite:///{path}", busy_timeout=0.02) as store, \
            WriteLockHolder(path) as holder:
        threading.Timer(0.3, holder.release.set).start()
        store.put_staged("r1", "t1", EntryRecord("a", Entry("addr", 1, "e", 1.0)))
        assert holder.release.is_set()
        assert store.has_staged("r1", "t1")


def test_sqlite_writer_gives_up_after_bounded_retries(tmp_path: Path) -> None:
    path = tmp_path / "refstore.db"
    with SQLRefStore(f"sqlite:///{path}", busy_timeout=0.01) as store:
        _create_repo(store)
        with WriteLockHolder(path), pytest.raises(DatabaseError, match="locked"):
            store.put_staged("r1", "t1", EntryRecord("a", None))
        # the failed write left nothing behind, and the store works again
        assert not store.has_staged("r1", "t1")
        store.put_staged("r1", "t1", EntryRecord("a", None))
        assert store.has_staged("r1", "t1")
