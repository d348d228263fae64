"""The combined reads of the object hot paths, and the bounded retry of transactions.

Each combined read is checked on SQLite, PostgreSQL and DynamoDB against the default
implementation of :class:`RefStore` (composed of the single reads), which any other
refstore inherits.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc as sa_exc

from lakefs_core.block.local import LocalBlockStore
from lakefs_core.errors import (
    BranchNotFoundError,
    CommitNotFoundError,
    DatabaseError,
    InvalidRefError,
    ObjectNotFoundError,
    ProtectedBranchError,
    ReadOnlyRepositoryError,
    RefNotFoundError,
    RepositoryNotFoundError,
)
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import Branch, Entry, EntryRecord, Repository
from lakefs_core.refstore import sql
from lakefs_core.refstore.base import RefStore
from lakefs_core.refstore.sql import SQLRefStore

#: the store's own combined read, and the default composed of single reads
IMPLEMENTATIONS = ["store", "default"]


def entry(n: int) -> Entry:
    return Entry(address=f"data/obj{n}", size=n, etag=f"etag{n}", mtime=1_712_345_678.5 + n,
                 metadata={"n": str(n)})


def new_repo(store: SQLRefStore, repo_id: str, **fields: Any) -> Repository:
    repo = Repository(id=repo_id, storage_namespace=f"local://ns/{repo_id}",
                      default_branch="main", creation_date=1_700_000_000, **fields)
    store.create_repository(repo, Branch(name="main", commit_id="c0", staging_token="t0"))
    return repo


def write_target(
    store: SQLRefStore, impl: str
) -> Callable[[str, str], tuple[Repository, tuple[str, ...], Branch | None]]:
    if impl == "store":
        return store.get_write_target
    return lambda *args: RefStore.get_write_target(store, *args)


def branch_and_staged(
    store: SQLRefStore, impl: str
) -> Callable[[str, str, str], tuple[Branch, EntryRecord | None] | None]:
    if impl == "store":
        return store.get_branch_and_staged
    return lambda *args: RefStore.get_branch_and_staged(store, *args)


# --- the refstore -------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_write_target(store: SQLRefStore, impl: str) -> None:
    read = write_target(store, impl)
    with pytest.raises(RepositoryNotFoundError):
        read("r1", "main")
    repo = new_repo(store, "r1", read_only=True, storage_id="west")
    other = new_repo(store, "r2")
    store.set_branch_protection_rules("r2", ["main"])  # another repository's rules
    store.set_branch_hidden("r1", "main", True)  # another record of the same branch
    store.create_branch("r2", Branch("dev", "c9", "t9"))  # another repository's branch
    main = store.get_branch("r1", "main")
    assert read("r1", "main") == (repo, (), main)
    assert read("r1", "dev") == (repo, (), None)
    store.set_branch_protection_rules("r1", ["release-*"])
    assert read("r1", "dev") == (repo, ("release-*",), None)
    sealing = Branch("main", "c1", "t2", sealed_tokens=("t1", "t0"), sealed_at=1_700_000_005.5)
    store.update_branch("r1", main, sealing)
    assert read("r1", "main") == (repo, ("release-*",), sealing)
    assert read("r2", "dev") == (other, ("main",), Branch("dev", "c9", "t9"))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_branch_and_staged(store: SQLRefStore, impl: str) -> None:
    read = branch_and_staged(store, impl)
    assert read("r1", "main", "a") is None  # no repository
    new_repo(store, "r1")
    new_repo(store, "r2")
    main = store.get_branch("r1", "main")
    assert read("r1", "dev", "a") is None
    assert read("r1", "main", "a") == (main, None)
    store.put_staged("r1", "t0", EntryRecord("a", entry(1)))
    store.put_staged("r1", "t0", EntryRecord("gone", None))
    store.put_staged("r1", "other", EntryRecord("b", entry(2)))  # not the branch's token
    store.put_staged("r2", "t0", EntryRecord("b", entry(3)))  # another repository
    assert read("r1", "main", "a") == (main, EntryRecord("a", entry(1)))
    assert read("r1", "main", "gone") == (main, EntryRecord("gone", None))
    assert read("r1", "main", "b") == (main, None)
    assert read("r1", "main", "a/") == (main, None)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_branch_and_staged_reads_sealed_tokens_newest_first(store: SQLRefStore,
                                                           impl: str) -> None:
    read = branch_and_staged(store, impl)
    new_repo(store, "r1")
    sealing = Branch("main", "c0", "live", sealed_tokens=("newer", "older"), sealed_at=5.0)
    store.update_branch("r1", store.get_branch("r1", "main"), sealing)
    store.put_staged("r1", "older", EntryRecord("a", entry(1)))
    store.put_staged("r1", "older", EntryRecord("b", entry(1)))
    store.put_staged("r1", "newer", EntryRecord("b", None))
    store.put_staged("r1", "older", EntryRecord("c", entry(1)))
    store.put_staged("r1", "newer", EntryRecord("c", entry(2)))
    store.put_staged("r1", "live", EntryRecord("c", entry(3)))
    assert read("r1", "main", "a") == (sealing, EntryRecord("a", entry(1)))
    assert read("r1", "main", "b") == (sealing, EntryRecord("b", None))
    assert read("r1", "main", "c") == (sealing, EntryRecord("c", entry(3)))
    assert read("r1", "main", "d") == (sealing, None)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_repository_and_staged(store: SQLRefStore, impl: str) -> None:
    """The read of a stat or GET on a branch: one statement, or one transaction while
    the branch has sealed tokens."""
    read = (store.get_repository_and_staged if impl == "store"
            else lambda *args: RefStore.get_repository_and_staged(store, *args))
    with pytest.raises(RepositoryNotFoundError):
        read("r1", "main", "a")
    repo = new_repo(store, "r1", read_only=True, storage_id="west")
    new_repo(store, "r2")
    main = store.get_branch("r1", "main")
    assert read("r1", "dev", "a") == (repo, None)
    assert read("r1", "main", "a") == (repo, (main, None))
    store.put_staged("r1", "t0", EntryRecord("a", entry(1)))
    store.put_staged("r1", "t0", EntryRecord("gone", None))
    store.put_staged("r2", "t0", EntryRecord("b", entry(3)))  # another repository
    assert read("r1", "main", "a") == (repo, (main, EntryRecord("a", entry(1))))
    assert read("r1", "main", "gone") == (repo, (main, EntryRecord("gone", None)))
    assert read("r1", "main", "b") == (repo, (main, None))
    sealing = Branch("main", "c0", "live", sealed_tokens=("t0",), sealed_at=5.0)
    store.update_branch("r1", main, sealing)
    store.put_staged("r1", "live", EntryRecord("c", entry(4)))
    assert read("r1", "main", "a") == (repo, (sealing, EntryRecord("a", entry(1))))
    assert read("r1", "main", "c") == (repo, (sealing, EntryRecord("c", entry(4))))
    assert read("r1", "main", "d") == (repo, (sealing, None))


def test_thread_readers_see_each_commit_and_cannot_write(sqlite_store: SQLRefStore) -> None:
    """The driver's connections kept per thread for the hot reads see every write as
    soon as it commits, in each thread, refuse to write, and are closed with the store."""
    new_repo(sqlite_store, "r1")
    seen: list[Any] = []

    def reader() -> None:
        for n in range(20):
            sqlite_store.put_staged("r1", "t0", EntryRecord(f"p{n}", entry(n)))
            seen.append(sqlite_store.get_repository_and_staged("r1", "main", f"p{n}")[1])

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 60 and all(found is not None and found[1] is not None
                                   for found in seen)
    readers = sqlite_store._readers
    assert readers is not None
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        readers.connection().execute("DELETE FROM repositories")
    assert sqlite_store.get_repository("r1").id == "r1"
    sqlite_store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        readers.connection().execute("SELECT 1")


def _open_files(under: Path) -> list[str]:
    """The files under ``under`` that this process holds open, once per descriptor."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(under)):
                found.append(target)
    return sorted(found)


def test_a_thread_that_ends_closes_its_connections(tmp_path: Path) -> None:
    """Thread pools end idle threads and start new ones: the driver connections a
    thread opened are closed when it ends, so open files do not grow with them."""
    store = SQLRefStore(f"sqlite:///{tmp_path / 'refstore.db'}")
    try:
        new_repo(store, "r1")

        def request(n: int) -> None:
            store.get_repository_and_staged("r1", "main", "a")
            store.stage_on_branch("r1", "main", "t0", EntryRecord(f"p{n}", entry(n)))

        def in_a_thread(n: int) -> None:
            t = threading.Thread(target=request, args=(n,))
            t.start()
            t.join()

        in_a_thread(0)
        gc.collect()
        before = _open_files(tmp_path)
        for n in range(1, 21):
            in_a_thread(n)
        gc.collect()
        assert _open_files(tmp_path) == before
        readers, writers = store._readers, store._writers
        assert readers is not None and writers is not None
        assert not readers._opened and not writers._opened
    finally:
        store.close()


def test_writers_of_one_file_take_turns_in_a_process(tmp_path: Path) -> None:
    """Writers of one SQLite file in a process queue on one gate (every store of that
    file shares it), a thread holding it passes through, and a writer kept out longer
    than the timeout fails as a locked database does, which the store retries."""
    from lakefs_core.database import WriterGate

    path = str(tmp_path / "refstore.db")
    gate = WriterGate.of(path, 0.1)
    assert WriterGate.of(str(tmp_path / "." / "refstore.db"), 0.2) is gate
    assert gate.timeout == 0.2
    with gate.held(), gate.held():  # the holder passes through
        outcome: list[BaseException | None] = []

        def other() -> None:
            try:
                with gate.held():
                    outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - the test reads it below
                outcome.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert isinstance(outcome[0], sa_exc.OperationalError)
    assert sql._is_transient(outcome[0])
    with gate.held():  # free again
        pass

    store = SQLRefStore(f"sqlite:///{path}")
    try:
        new_repo(store, "r1")

        def writer(n: int) -> None:
            for i in range(30):
                store.stage_on_branch("r1", "main", "t0", EntryRecord(f"{n}/{i}", entry(i)))
                store.put_staged("r1", "t0", EntryRecord(f"{n}/{i}/b", entry(i)))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(list(store.list_staged("r1", "t0"))) == 240
    finally:
        store.close()


# --- the bounded retry of a transaction --------------------------------------------------------
def _locked() -> sa_exc.OperationalError:
    return sa_exc.OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLRefStore]:
    s = SQLRefStore(f"sqlite:///{tmp_path / 'refstore.db'}")
    yield s
    s.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(sql.time, "sleep", waits.append)
    return waits


def test_transaction_retried_after_a_lock(sqlite_store: SQLRefStore,
                                          sleeps: list[float]) -> None:
    calls: list[int] = []

    def work(conn: Any) -> str:
        calls.append(1)
        if len(calls) < 4:
            raise _locked()
        return "done"

    assert sqlite_store._read(work) == "done"
    assert len(calls) == 4
    assert len(sleeps) == 3
    for attempt, wait in enumerate(sleeps, start=1):
        assert 0 <= wait <= min(0.5, 0.01 * 2 ** (attempt - 1))


def test_transaction_gives_up_after_ten_attempts(sqlite_store: SQLRefStore,
                                                 sleeps: list[float]) -> None:
    calls: list[int] = []

    def work(conn: Any) -> None:
        calls.append(1)
        raise _locked()

    with pytest.raises(DatabaseError, match="database is locked"):
        sqlite_store._write(work)
    assert len(calls) == 10
    assert len(sleeps) == 9
    assert all(0 <= wait <= 0.5 for wait in sleeps)


def test_other_errors_are_not_retried(sqlite_store: SQLRefStore, sleeps: list[float]) -> None:
    calls: list[int] = []

    def work(conn: Any) -> None:
        calls.append(1)
        raise sa_exc.OperationalError("SELECT", {}, Exception("disk I/O error"))

    with pytest.raises(DatabaseError, match="disk I/O error"):
        sqlite_store._read(work)
    assert (len(calls), sleeps) == (1, [])
    assert sqlite_store.get_branch_protection_rules("r1") == ()
    assert sleeps == []  # nor does a first attempt that succeeds wait


def test_a_write_outlasts_a_lock_held_longer_than_the_busy_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "refstore.db"
    store = SQLRefStore(f"sqlite:///{path}", busy_timeout=0.02)
    waits: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        real_sleep(seconds)

    new_repo(store, "r1")
    monkeypatch.setattr(sql.time, "sleep", sleep)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the write lock, released 0.1 s later
        release = threading.Timer(0.1, blocker.rollback)
        release.start()
        store.put_staged("r1", "t1", EntryRecord("a", entry(1)))  # 10 x 0.02 s of waits at least
        release.join()
        assert waits  # the first BEGIN IMMEDIATE met the lock, a later one took it
        assert store.get_staged("r1", "t1", "a") == EntryRecord("a", entry(1))
    finally:
        blocker.close()
        store.close()


# --- the graveler's hot paths over the combined reads -------------------------------------------
@pytest.fixture
def graveler(store: RefStore, tmp_path: Path) -> Graveler:
    blocks = LocalBlockStore(str(tmp_path / "blockstore"))
    g = Graveler(store, lambda _sid: blocks)
    g.create_repository("repo", "local://ns")
    return g


def test_check_direct_write_errors_in_order(graveler: Graveler) -> None:
    g = graveler
    with pytest.raises(RepositoryNotFoundError):
        g.check_direct_write("nope", "missing")
    with pytest.raises(BranchNotFoundError, match="'missing' not found"):
        g.check_direct_write("repo", "missing")
    g.set_branch_protection_rules("repo", ["rel*", "main"])
    with pytest.raises(ProtectedBranchError):
        g.check_direct_write("repo", "release-missing")  # protection before existence
    with pytest.raises(ProtectedBranchError):
        g.check_direct_write("repo", "main")
    g.set_branch_protection_rules("repo", [])
    repo, main = g.check_direct_write("repo", "main")
    assert (repo, main) == (g.get_repository("repo"), g.get_branch("repo", "main"))
    g.set_read_only("repo", True)
    with pytest.raises(ReadOnlyRepositoryError):
        g.check_direct_write("repo", "missing")  # read-only before existence


def test_get_entry_in_over_every_kind_of_ref(graveler: Graveler) -> None:
    g = graveler
    g.set_entry("repo", "main", "a", entry(1))
    first = g.commit("repo", "main", "first", "alice")
    g.create_tag("repo", "v1", "main")
    g.set_entry("repo", "main", "a", entry(2))
    g.set_entry("repo", "main", "b", entry(3))
    second = g.commit("repo", "main", "second", "alice")
    g.set_entry("repo", "main", "a", entry(4))
    g.delete_entry("repo", "main", "b")
    repo = g.get_repository("repo")
    assert g.get_entry_in(repo, "main", "a") == entry(4)  # staged
    with pytest.raises(ObjectNotFoundError):
        g.get_entry_in(repo, "main", "b")  # staged delete
    with pytest.raises(ObjectNotFoundError):
        g.get_entry_in(repo, "main", "c")  # nowhere
    assert g.get_entry_in(repo, "main@", "a") == entry(2)
    assert g.get_entry_in(repo, "main@", "b") == entry(3)
    assert g.get_entry_in(repo, "main~1", "a") == entry(1)
    assert g.get_entry_in(repo, "v1", "a") == entry(1)  # a tag
    assert g.get_entry_in(repo, first.id, "a") == entry(1)
    assert g.get_entry_in(repo, second.id[:12], "b") == entry(3)  # a short commit id
    with pytest.raises(InvalidRefError):
        g.get_entry_in(repo, "v1@", "a")
    with pytest.raises(RefNotFoundError):
        g.get_entry_in(repo, "nothing", "a")
    with pytest.raises(CommitNotFoundError):
        g.get_entry_in(repo, "f" * 64, "a")


def test_get_entry_in_on_a_branch_with_no_commit(graveler: Graveler) -> None:
    g = graveler
    g.create_repository("mirror", "local://mirror-ns", initial_commit=False)
    repo = g.get_repository("mirror")
    with pytest.raises(RefNotFoundError, match="no commit yet"):
        g.get_entry_in(repo, "main", "a")


def test_get_entry_in_during_a_commit_reads_sealed_changes(graveler: Graveler) -> None:
    g = graveler
    g.set_entry("repo", "main", "a", entry(1))
    g.set_entry("repo", "main", "b", entry(1))
    current = g.refstore.get_branch("repo", "main")
    sealing = replace(current, staging_token="live", sealed_tokens=(current.staging_token,),
                      sealed_at=1.0)
    g.refstore.update_branch("repo", current, sealing)
    g.set_entry("repo", "main", "b", entry(2))
    repo = g.get_repository("repo")
    assert g.get_entry_in(repo, "main", "a") == entry(1)
    assert g.get_entry_in(repo, "main", "b") == entry(2)
