"""Staging without waiting (``database.without_waiting``), for writes made on an event
loop: refused at once while another writer holds SQLite's write lock, with nothing
written; and the write-ahead log they leave unchecked is checkpointed by a thread."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefs_core import database
from lakefs_core.database import WouldWait, WriterGate, without_waiting
from lakefs_core.graveler.model import Branch, Entry, EntryRecord, Repository
from lakefs_core.refstore.sql import SQLRefStore


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[SQLRefStore, str]]:
    path = str(tmp_path / "refstore.db")
    store = SQLRefStore(f"sqlite:///{path}")
    store.create_repository(Repository("r", "local://r", "main", 1.0),
                            Branch("main", "", "t0"))
    yield store, path
    store.close()


def record(name: str) -> EntryRecord:
    return EntryRecord(name, Entry(f"data/{name}", 1, name, 1.0))


def staged(store: SQLRefStore) -> list[str]:
    return [r.path for r in store.list_staged("r", "t0")]


def test_a_sqlite_file_stages_without_waiting(db: tuple[SQLRefStore, str]) -> None:
    store, _ = db
    assert store.stages_without_waiting


def test_refused_at_once_while_a_thread_of_this_process_writes(
        db: tuple[SQLRefStore, str]) -> None:
    store, path = db
    gate = WriterGate.of(path, 30)
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with gate.held():
            holding.set()
            release.wait(30)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert holding.wait(30)
        with without_waiting(), pytest.raises(WouldWait):
            store.stage_on_branch("r", "main", "t0", record("a"))
        assert staged(store) == []
    finally:
        release.set()
        t.join()
    with without_waiting():
        store.stage_on_branch("r", "main", "t0", record("a"))
    assert staged(store) == ["a"]


def test_refused_at_once_while_another_process_writes(db: tuple[SQLRefStore, str]) -> None:
    """The store's busy timeout is 30 s: a write that waited would fail the test with
    a locked database after 30 s instead of raising WouldWait."""
    store, path = db
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with without_waiting(), pytest.raises(WouldWait):
            store.stage_on_branch("r", "main", "t0", record("a"))
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert staged(store) == []
    with without_waiting():
        store.stage_on_branch("r", "main", "t0", record("a"))
    store.stage_on_branch("r", "main", "t0", record("b"))  # and waiting, as before
    assert staged(store) == ["a", "b"]


def test_a_failed_write_without_waiting_writes_nothing(db: tuple[SQLRefStore, str]) -> None:
    from lakefs_core.errors import RepositoryNotFoundError

    store, _ = db
    with without_waiting(), pytest.raises(RepositoryNotFoundError):
        store.stage_on_branch("missing", "main", "t0", record("a"))
    with without_waiting():
        store.stage_on_branch("r", "main", "t0", record("b"))
    assert staged(store) == ["b"]


def test_writes_without_waiting_are_checkpointed_by_a_thread(
        db: tuple[SQLRefStore, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """They leave SQLite's automatic checkpoints off (a checkpoint writes the database
    file and syncs it, too long for an event loop); a thread of their own runs them
    instead, so the log stays bounded."""
    store, path = db
    monkeypatch.setattr(database, "CHECKPOINT_EVERY", 50)
    writers = store._writers
    assert writers is not None
    refused = 0
    for i in range(2000):
        rec = record(f"{i:05d}" + "x" * 200)
        try:
            with without_waiting():
                store.stage_on_branch("r", "main", "t0", rec)
        except WouldWait:  # the checkpoint holds the lock: as the object lane does
            refused += 1
            store.stage_on_branch("r", "main", "t0", rec)
    deadline = threading.Event()
    for _ in range(300):
        if writers.checkpoints >= 10:
            break
        deadline.wait(0.1)
    assert writers.checkpoints >= 10
    # without checkpoints the log holds every page written: over 20 MiB here; SQLite's
    # own automatic checkpoints keep it near 4 MiB
    assert Path(path + "-wal").stat().st_size < 8 * 1024 * 1024
    assert len(staged(store)) == 2000
