"""Opening the auth store while other processes write to it: a server and its
replication service open the same SQLite file at once when a region starts."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from lakefs_core.auth.store import AuthStore

SECRET = "auth-store-opening-test-secret-key"


def _open_repeatedly(url: str, times: int, errors: multiprocessing.Queue[str]) -> None:
    for _ in range(times):
        try:
            AuthStore(url, SECRET).close()
        except Exception as e:  # noqa: BLE001 - reported to the test
            errors.put(f"open: {e}")
            return
    errors.put("")


def _write_users(url: str, prefix: str, count: int,
                 errors: multiprocessing.Queue[str]) -> None:
    try:
        store = AuthStore(url, SECRET)
        try:
            for i in range(count):
                store.create_user(f"{prefix}-{i}")
        finally:
            store.close()
    except Exception as e:  # noqa: BLE001 - reported to the test
        errors.put(f"write: {e}")
        return
    errors.put("")


def test_the_store_opens_while_others_write(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'auth.db'}"
    AuthStore(url, SECRET).close()
    ctx = multiprocessing.get_context("spawn")
    errors: multiprocessing.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_open_repeatedly, args=(url, 40, errors)) for _ in range(3)]
    procs += [ctx.Process(target=_write_users, args=(url, f"w{n}", 200, errors))
              for n in range(2)]
    for p in procs:
        p.start()
    outcomes = [errors.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert [o for o in outcomes if o] == []
    store = AuthStore(url, SECRET)
    try:
        assert len(store.list_users(prefix="w")) == 400
    finally:
        store.close()
