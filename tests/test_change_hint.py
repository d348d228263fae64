"""The change hint beside a SQLite file: the auth change count is read again exactly when
a writer changed the hint, or when the hint has been trusted for TRUST_SECONDS."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefs_core.auth import AuthStore
from lakefs_core.auth.service import AuthService
from lakefs_core.change_hint import TRUST_SECONDS, ChangeHint, HintedCount
from lakefs_core.errors import AuthenticationError

SECRET_KEY = "a-test-encryption-key"
#: two processes' stores on one SQLite file, and the file
Stores = tuple[AuthStore, AuthStore, Path]


class Reads:
    """A count in a list, and how often it was read."""

    def __init__(self) -> None:
        self.value = 0
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.value


def test_the_count_is_read_again_only_after_a_change_in_another_process(
        tmp_path: Path) -> None:
    path = str(tmp_path / "db-auth-changes")
    now = [0.0]
    reads = Reads()
    count = HintedCount(ChangeHint(path), reads, clock=lambda: now[0])
    assert count.get() == 0
    assert count.get() == 0
    assert reads.reads == 1  # the hint stayed: no second read

    reads.value = 1  # a writer in another process commits, then changes the hint
    subprocess.run([sys.executable, "-c",
                    "import sys; from lakefs_core.change_hint import ChangeHint; "
                    "ChangeHint(sys.argv[1]).change()", path], check=True)
    assert count.get() == 1
    assert reads.reads == 2
    assert count.get() == 1
    assert reads.reads == 2


def test_an_unchanged_hint_is_trusted_for_a_bounded_time(tmp_path: Path) -> None:
    now = [0.0]
    reads = Reads()
    count = HintedCount(ChangeHint(str(tmp_path / "hint")), reads, clock=lambda: now[0])
    assert count.get() == 0
    reads.value = 5  # a writer that died between its commit and the hint's change
    now[0] += TRUST_SECONDS / 2
    assert count.get() == 0
    now[0] += TRUST_SECONDS
    assert count.get() == 5
    assert reads.reads == 2


def test_a_reading_begun_before_a_change_is_not_kept_under_the_new_hint(
        tmp_path: Path) -> None:
    """The hint is read before the count: a change that lands between the two makes the
    next call read again, even though the count read already had it."""
    hint = ChangeHint(str(tmp_path / "hint"))
    reads = Reads()

    def read_during_a_change() -> int:
        if reads.reads == 0:
            reads.value = 1
            hint.change()  # committed and signalled while this read was under way
        return reads()

    count = HintedCount(hint, read_during_a_change, clock=lambda: 0.0)
    assert count.get() == 1
    reads.value = 2  # nothing signalled: but the first reading was under the old hint
    assert count.get() == 2
    assert reads.reads == 2


@pytest.fixture
def two_stores(tmp_path: Path) -> Iterator[Stores]:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    here, elsewhere = AuthStore(url, SECRET_KEY), AuthStore(url, SECRET_KEY)
    yield here, elsewhere, tmp_path / "metadata.db"
    here.close()
    elsewhere.close()


def test_the_auth_store_reads_its_count_only_when_the_tables_changed(two_stores: Stores) -> None:
    here, elsewhere, db = two_stores
    assert Path(f"{db}-auth-changes").stat().st_size == 8
    statements: list[str] = []
    assert here._readers is not None
    here._readers.connection().set_trace_callback(statements.append)
    first = here.changes()
    here.changes()
    assert sum("auth_changes" in s for s in statements) == 1

    elsewhere.setup_admin("admin")  # another process's write
    assert here.changes() > first
    assert sum("auth_changes" in s for s in statements) == 2

    # other tables of the file change (an upload staged a record): no read again
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS other (x)")
        conn.execute("INSERT INTO other VALUES (1)")
    here.changes()
    assert sum("auth_changes" in s for s in statements) == 2


def test_a_key_deleted_through_another_store_is_refused_at_the_next_request(
        two_stores: Stores) -> None:
    here, elsewhere, _ = two_stores
    elsewhere.setup_admin("admin")
    elsewhere.create_user("u")
    key = elsewhere.create_credentials("u")
    service = AuthService(here)
    for _ in range(3):
        assert service.view().sign_in(key.access_key_id, key.secret).username == "u"
    elsewhere.delete_credentials("u", key.access_key_id)
    with pytest.raises(AuthenticationError):
        service.view().sign_in(key.access_key_id, key.secret)


def test_a_write_made_without_the_hint_is_seen_within_the_bound(two_stores: Stores) -> None:
    here, _, db = two_stores
    now = [0.0]
    assert here._count is not None
    here._count._clock = lambda: now[0]
    before = here.changes()
    with sqlite3.connect(db) as conn:  # a writer that never changes the hint
        conn.execute("UPDATE auth_changes SET changes = changes + 1")
    assert here.changes() == before
    now[0] += TRUST_SECONDS
    assert here.changes() == before + 1
